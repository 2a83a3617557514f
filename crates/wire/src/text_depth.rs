//! How deep the messages of protobuf text format nest, found in one pass over the text that
//! stops at a limit: for a caller about to hand the text to a recursive parser (prost-reflect's
//! `parse_text_format`), which has no limit of its own and would run out of stack.

/// The nesting protobuf C++ allows a binary message (`CodedInputStream`'s default recursion
/// limit); text nested deeper is refused before it is parsed.
pub const TEXT_RECURSION_LIMIT: usize = 100;

/// Where the text format `text` first opens a message nested more than `limit` deep (the
/// byte offset of that `{` or `<`), or `None` when it never does. Braces inside strings and
/// comments do not count; the text need not be valid otherwise (the parser judges that).
pub fn text_nesting_past(text: &[u8], limit: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&b) = text.get(i) {
        match b {
            b'{' | b'<' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b'}' | b'>' => depth = depth.saturating_sub(1),
            b'#' => {
                while text.get(i).is_some_and(|&c| c != b'\n') {
                    i += 1;
                }
            }
            b'"' | b'\'' => {
                i += 1;
                while let Some(&c) = text.get(i) {
                    if c == b || c == b'\n' {
                        break;
                    }
                    // An escape takes the next byte with it (`\"` does not end the string).
                    i += if c == b'\\' { 2 } else { 1 };
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_counted_outside_strings_and_comments() {
        assert_eq!(text_nesting_past(b"a { b < c {} > }", 3), None);
        assert_eq!(text_nesting_past(b"a { b < c {} > }", 2), Some(10));
        let quoted = b"s: \"{{{\\\"{{{\" t: '<<<' # {{{{\n u { }";
        assert_eq!(text_nesting_past(quoted, 1), None);
        let deep = "a {".repeat(1_000_000);
        assert_eq!(
            text_nesting_past(deep.as_bytes(), TEXT_RECURSION_LIMIT),
            Some(3 * TEXT_RECURSION_LIMIT + 2)
        );
        assert_eq!(text_nesting_past(b"\"\\", 0), None);
    }
}
