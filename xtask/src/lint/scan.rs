//! A small Rust lexer, good enough for repository rules: it separates code from comments and
//! string literals (so neither docs nor strings trip a rule) and splits code into tokens and paths.

/// A source file split into what is code and what is comment, line numbers preserved.
#[derive(Debug)]
pub struct Split {
    /// The source with comments and the contents of string and char literals blanked out.
    pub code: String,
    /// The source with everything but comments blanked out.
    pub comments: String,
}

/// Splits `src` into code and comments. Blanked characters become spaces; newlines are kept.
pub fn split(src: &str) -> Split {
    let s: Vec<char> = src.chars().collect();
    let mut code = String::with_capacity(src.len());
    let mut comments = String::with_capacity(src.len());
    let n = s.len();
    let mut i = 0;
    // Pushes `c` to `keep` and a blank to the other.
    fn put(keep: &mut String, other: &mut String, c: char) {
        keep.push(c);
        other.push(if c == '\n' { '\n' } else { ' ' });
    }
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < n {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < n && s[i] != '\n' {
                put(&mut comments, &mut code, s[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < n {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    put(&mut comments, &mut code, '/');
                    put(&mut comments, &mut code, '*');
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    put(&mut comments, &mut code, '*');
                    put(&mut comments, &mut code, '/');
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    put(&mut comments, &mut code, s[i]);
                    i += 1;
                }
            }
        } else if c == '"' {
            // A plain (or b"", c"") string: keep the quotes, blank the body.
            put(&mut code, &mut comments, '"');
            i += 1;
            while i < n && s[i] != '"' {
                if s[i] == '\\' && i + 1 < n {
                    put(&mut comments, &mut code, ' ');
                    i += 1;
                }
                let ch = if s[i] == '\n' { '\n' } else { ' ' };
                put(&mut code, &mut comments, ch);
                i += 1;
            }
            if i < n {
                put(&mut code, &mut comments, '"');
                i += 1;
            }
        } else if (c == 'r' || ((c == 'b' || c == 'c') && next == Some('r')))
            && (i == 0 || !is_ident(s[i - 1]))
            && raw_string_start(&s, i).is_some()
        {
            let (body_start, hashes) = raw_string_start(&s, i).unwrap_or((i, 0));
            while i < body_start {
                put(&mut code, &mut comments, s[i]);
                i += 1;
            }
            loop {
                if i >= n {
                    break;
                }
                if s[i] == '"' && (0..hashes).all(|k| s.get(i + 1 + k) == Some(&'#')) {
                    for _ in 0..=hashes {
                        put(&mut code, &mut comments, s[i]);
                        i += 1;
                    }
                    break;
                }
                let ch = if s[i] == '\n' { '\n' } else { ' ' };
                put(&mut code, &mut comments, ch);
                i += 1;
            }
        } else if c == '\'' {
            // A char literal ('a', '\n', '\u{1F600}') or a lifetime/label ('a, 'static).
            let close = if next == Some('\\') {
                (i + 3..n.min(i + 13)).find(|&k| s[k] == '\'')
            } else if s.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    put(&mut code, &mut comments, '\'');
                    for _ in i + 1..end {
                        put(&mut code, &mut comments, ' ');
                    }
                    put(&mut code, &mut comments, '\'');
                    i = end + 1;
                }
                None => {
                    put(&mut code, &mut comments, c);
                    i += 1;
                }
            }
        } else {
            put(&mut code, &mut comments, c);
            i += 1;
        }
    }
    Split { code, comments }
}

/// If a raw string literal starts at `i` (`r"`, `r#"`, `br##"`, ...), where its body starts and
/// how many `#` close it.
fn raw_string_start(s: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if s.get(j) == Some(&'b') || s.get(j) == Some(&'c') {
        j += 1;
    }
    if s.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while s.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (s.get(j) == Some(&'"')).then_some((j + 1, hashes))
}

/// A code token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword.
    Ident(String),
    /// `::`
    PathSep,
    /// Any other punctuation character.
    Punct(char),
}

/// A token and its 1-based line.
#[derive(Debug, Clone)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Its line, 1-based.
    pub line: usize,
}

/// Tokenizes code (the `code` half of [`split`]); literals become punctuation or are skipped.
pub fn tokens(code: &str) -> Vec<Token> {
    let s: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
                i += 1;
            }
            let word: String = s[start..i].iter().collect();
            // `r#ident` raw identifiers.
            let word = if word == "r" && s.get(i) == Some(&'#') {
                i += 1;
                let st = i;
                while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
                    i += 1;
                }
                s[st..i].iter().collect()
            } else {
                word
            };
            out.push(Token {
                tok: Tok::Ident(word),
                line,
            });
        } else if c.is_ascii_digit() {
            while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_' || s[i] == '.') {
                i += 1;
            }
        } else if c == ':' && s.get(i + 1) == Some(&':') {
            out.push(Token {
                tok: Tok::PathSep,
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::Punct(c),
                line,
            });
            i += 1;
        }
    }
    out
}

/// A path mentioned in code (`a::b::c`, or a flattened `use` tree leaf), with its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRef {
    /// The segments; a glob import ends in `*`.
    pub segments: Vec<String>,
    /// Its 1-based line.
    pub line: usize,
}

/// Every path in the token stream: `use` trees flattened to full paths, and every other maximal
/// `a::b::c` run (single identifiers included).
pub fn paths(toks: &[Token]) -> Vec<PathRef> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].tok == Tok::Ident("use".into()) {
            i += 1;
            use_tree(toks, &mut i, &mut Vec::new(), &mut out);
            continue;
        }
        if let Tok::Ident(first) = &toks[i].tok {
            let line = toks[i].line;
            let mut segs = vec![first.clone()];
            i += 1;
            while i + 1 < toks.len() && toks[i].tok == Tok::PathSep {
                match &toks[i + 1].tok {
                    Tok::Ident(s) => {
                        segs.push(s.clone());
                        i += 2;
                    }
                    // `Vec::<u8>::new`, `foo::{`: stop the run here.
                    _ => break,
                }
            }
            out.push(PathRef {
                segments: segs,
                line,
            });
            continue;
        }
        if toks[i].tok == Tok::PathSep {
            // A leading `::` (`::std::process`): the next identifier starts the path.
            i += 1;
            continue;
        }
        i += 1;
    }
    out
}

/// Parses one `use` tree at `*i`, pushing flattened leaves with `prefix` in front. Stops after the
/// tree (at `,`, `}` or `;`, which it does not consume).
fn use_tree(toks: &[Token], i: &mut usize, prefix: &mut Vec<String>, out: &mut Vec<PathRef>) {
    let depth = prefix.len();
    let mut line = toks.get(*i).map_or(0, |t| t.line);
    while let Some(t) = toks.get(*i) {
        match &t.tok {
            Tok::PathSep => *i += 1,
            Tok::Ident(s) if s == "as" => {
                // `as alias`: the alias is not part of the path.
                *i += 2;
            }
            Tok::Ident(s) => {
                prefix.push(s.clone());
                line = t.line;
                *i += 1;
            }
            Tok::Punct('*') => {
                prefix.push("*".into());
                line = t.line;
                *i += 1;
            }
            Tok::Punct('{') => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.tok) {
                        None => break,
                        Some(Tok::Punct('}')) => {
                            *i += 1;
                            break;
                        }
                        Some(Tok::Punct(',')) => *i += 1,
                        Some(_) => {
                            let before = *i;
                            use_tree(toks, i, prefix, out);
                            if *i == before {
                                *i += 1;
                            }
                        }
                    }
                }
                prefix.truncate(depth);
                return;
            }
            _ => break,
        }
    }
    if prefix.len() > depth {
        out.push(PathRef {
            segments: prefix.clone(),
            line,
        });
    }
    prefix.truncate(depth);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(src: &str) -> Vec<String> {
        paths(&tokens(&split(src).code))
            .into_iter()
            .map(|p| p.segments.join("::"))
            .collect()
    }

    #[test]
    fn comments_and_strings_are_not_code() {
        let src = "let a = \"std::process::Command\"; // std::process::Command\n/* unsafe /* nested */ fork */ let b = r#\"unsafe \"quoted\"\"#; let c = '\"'; let d: &'static str = \"x\";";
        let sp = split(src);
        assert!(!sp.code.contains("process"), "{}", sp.code);
        assert!(!sp.code.contains("unsafe"), "{}", sp.code);
        assert!(sp.code.contains("'static"), "{}", sp.code);
        assert!(sp.comments.contains("// std::process::Command"));
        assert_eq!(sp.code.lines().count(), src.lines().count());
    }

    #[test]
    fn tricky_literals() {
        // An escaped quote in a char literal, a lifetime, a byte string, a raw identifier and a
        // string spanning lines must not desynchronize the lexer.
        let src = "let q = '\\''; fn f<'a>(x: &'a u8) {}\nlet b = b\"unsafe\\\"fork\";\nlet r#type = 1;\nlet m = \"a\nunsafe\nb\";\nunsafe { }";
        let sp = split(src);
        let toks = tokens(&sp.code);
        let unsafes: Vec<usize> = toks
            .iter()
            .filter(|t| t.tok == Tok::Ident("unsafe".into()))
            .map(|t| t.line)
            .collect();
        assert_eq!(unsafes, vec![7], "{}", sp.code);
        assert!(toks.iter().any(|t| t.tok == Tok::Ident("type".into())));
        assert!(!sp.code.contains("fork"));
    }

    #[test]
    fn use_trees_flatten() {
        let got = segs("use std::{process::{self, Command as C}, os::unix::process::*};");
        assert_eq!(
            got,
            vec![
                "std::process::self",
                "std::process::Command",
                "std::os::unix::process::*"
            ]
        );
    }

    #[test]
    fn expression_paths() {
        let got = segs("let x = ::std::process::Command::new(\"ls\").arg(1);");
        assert!(
            got.contains(&"std::process::Command::new".to_owned()),
            "{got:?}"
        );
    }
}
