//! Untrusted bytes as a worker's request head: the gateway's validation and header rewriting
//! never panic, and what they accept goes only to the route's origin with exactly the injected
//! credential (oracle: `stockade_gateway::oracle::check_request_bytes`).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use stockade_gateway::SecretValue;
use stockade_gateway::head::{HeadContext, RouteView};
use stockade_policy::Origin;

struct Fixture {
    origin: Origin,
    inject: Vec<(http::HeaderName, SecretValue)>,
    pass: Vec<http::HeaderName>,
    ctx: HeadContext,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("stockade-fuzz-gateway-head-{}", std::process::id()));
        std::fs::write(&path, "Bearer sk-fuzz-secret-value\n").expect("write secret fixture");
        let value = stockade_gateway::SecretSource::File(path.clone()).resolve().expect("resolve secret fixture");
        let _ = std::fs::remove_file(&path);
        Fixture {
            origin: "https://api.example.com".parse().expect("origin"),
            inject: vec![(http::header::AUTHORIZATION, value.clone()), (http::HeaderName::from_static("x-api-key"), value)],
            pass: vec![http::HeaderName::from_static("x-extra")],
            ctx: HeadContext { listener: "127.0.0.1:4000".parse().expect("addr"), max_header_bytes: 16 * 1024, max_request_body: 1 << 20 },
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let route = RouteView { origin: &f.origin, inject: &f.inject, pass: &f.pass };
    stockade_gateway::oracle::check_request_bytes(data, &f.ctx, &route);
});
