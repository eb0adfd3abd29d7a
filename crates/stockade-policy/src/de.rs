//! Deserialization helpers.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// Deserializes a string-keyed map, refusing duplicate keys (JSON would otherwise keep the last
/// one silently, and a reviewer reading the first would be misled).
pub(crate) fn unique_map<'de, D, V>(d: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct V_<V>(PhantomData<V>);
    impl<'de, V: Deserialize<'de>> Visitor<'de> for V_<V> {
        type Value = BTreeMap<String, V>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map with unique keys")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((k, v)) = map.next_entry::<String, V>()? {
                if out.contains_key(&k) {
                    return Err(serde::de::Error::custom(format!("duplicate key `{k}`")));
                }
                out.insert(k, v);
            }
            Ok(out)
        }
    }
    d.deserialize_map(V_(PhantomData))
}
