//! Tensor names as GraphDef inputs and signatures write them (`node`, `node:port`, `^node`),
//! split as TensorFlow's `ParseTensorName` splits them: the one place the `:port` suffix is
//! recognized.

/// Splits a trailing `:digits` port off `name`: `("a", Some("1"))` for `a:1`; `(name, None)`
/// when there is no `:` or what follows the last one is empty or not all digits (it is then
/// part of the node name).
pub fn split_port(name: &str) -> (&str, Option<&str>) {
    match name.rsplit_once(':') {
        Some((node, digits))
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (node, Some(digits))
        }
        _ => (name, None),
    }
}

/// The node name of a tensor name: `^a` -> `a`, `a:1` -> `a`.
pub fn node_name(tensor: &str) -> &str {
    split_port(tensor.strip_prefix('^').unwrap_or(tensor)).0
}

#[cfg(test)]
mod tests {
    use super::split_port;

    #[test]
    fn only_a_digit_suffix_is_a_port() {
        assert_eq!(split_port("a:1"), ("a", Some("1")));
        assert_eq!(split_port("scope/a:b:12"), ("scope/a:b", Some("12")));
        assert_eq!(split_port("a"), ("a", None));
        assert_eq!(split_port("a:"), ("a:", None));
        assert_eq!(split_port("a:1x"), ("a:1x", None));
        assert_eq!(split_port(":0"), ("", Some("0")));
    }
}
