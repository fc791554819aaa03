//! Reading Rust source in tests that check the code itself (its layers, its boundaries).

/// `source` without its comments, its string literals (raw ones included) and its test
/// module: the code alone.
pub fn code_only(source: &str) -> String {
    let source = source
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    let chars: Vec<char> = source.chars().collect();
    let mut code = String::new();
    let mut at = 0;
    while at < chars.len() {
        let rest = &chars[at..];
        if rest.starts_with(&['/', '/']) {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
        } else if rest[0] == 'r' && rest.get(1).is_some_and(|c| *c == '"' || *c == '#') {
            let hashes = rest[1..].iter().take_while(|c| **c == '#').count();
            if rest.get(1 + hashes) != Some(&'"') {
                code.push('r');
                at += 1;
                continue;
            }
            at += 2 + hashes;
            let closing: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            while at < chars.len() && !chars[at..].starts_with(&closing) {
                at += 1;
            }
            at += closing.len();
            code.push_str("\"\"");
        } else if rest[0] == '"' {
            at += 1;
            while at < chars.len() && chars[at] != '"' {
                at += if chars[at] == '\\' { 2 } else { 1 };
            }
            at += 1;
            code.push_str("\"\"");
        } else if rest[0] == '\'' && rest.get(2) == Some(&'\'') {
            at += 3;
        } else if rest[0] == '\'' && rest.get(1) == Some(&'\\') && rest.get(3) == Some(&'\'') {
            at += 4;
        } else {
            code.push(rest[0]);
            at += 1;
        }
    }
    code
}
