//! The dictionary of a `.npy` header, read as NumPy reads it or refused.
//!
//! NumPy reads the header with `ast.literal_eval` (a Python dict literal, so a key given twice
//! takes its last value), then requires exactly the keys `descr`, `fortran_order` and `shape`,
//! `shape` a tuple of ints and `fortran_order` a bool. This parser accepts the part of that
//! language every writer uses: string keys and values in single or double quotes without
//! escapes, `True`/`False`, and a flat tuple of decimal integers (with Python 2's `L` suffix
//! in format versions 1 and 2, which NumPy filters out). Everything else Python would also
//! accept (comments, escapes, nested parentheses, `+3`, `1_0`, hex) is refused, never read
//! another way. Nothing recurses: a nested value is refused where it starts.

use std::collections::BTreeMap;

/// The most dimensions NumPy (2.x) gives an array (`NPY_MAXDIMS`).
pub const MAX_NPY_RANK: usize = 64;

/// The longest header `np.load` reads without `allow_pickle=True` (`_MAX_HEADER_SIZE`).
pub const MAX_NPY_HEADER: usize = 10_000;

/// What a `.npy` header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// The dtype descriptor (`<f4`).
    pub descr: String,
    /// Whether the data is in Fortran order.
    pub fortran_order: bool,
    /// The shape.
    pub shape: Vec<i64>,
}

/// One value of the dictionary.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<i64>),
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
    /// Format versions 1 and 2: an `L` after an integer is dropped, as NumPy's
    /// `_filter_header` does for Python 2 files.
    python2_ints: bool,
}

impl Parser<'_> {
    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {} of the header", self.at))
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    /// Skips the whitespace Python allows inside brackets (where lines join).
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        self.skip_ws();
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            self.fail(&format!("expected {:?}", byte as char))
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let quote = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return self.fail("expected a quoted string"),
        };
        self.at += 1;
        let start = self.at;
        loop {
            match self.peek() {
                Some(b) if b == quote => break,
                Some(b'\\') => return self.fail("a backslash escape (not read here)"),
                Some(b'\n' | b'\r') | None => return self.fail("an unterminated string"),
                Some(_) => self.at += 1,
            }
        }
        let s = String::from_utf8_lossy(&self.text[start..self.at]).into_owned();
        self.at += 1;
        // `'a' 'b'` is one string in Python; refused rather than read as 'a'.
        self.skip_ws();
        if matches!(self.peek(), Some(b'\'' | b'"')) {
            return self.fail("strings written side by side (not read here)");
        }
        Ok(s)
    }

    fn int(&mut self) -> Result<i64, String> {
        let start = self.at;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        let digits = &self.text[start..self.at];
        if digits.is_empty() {
            return self.fail("expected a non-negative decimal integer");
        }
        if digits.len() > 1 && digits[0] == b'0' && digits.iter().any(|&d| d != b'0') {
            return self.fail("an integer with leading zeros (Python refuses it)");
        }
        if self.python2_ints && self.peek() == Some(b'L') {
            self.at += 1;
        }
        if self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        {
            return self.fail("an integer written in a form not read here");
        }
        std::str::from_utf8(digits)
            .ok()
            .and_then(|d| d.parse::<i64>().ok())
            .map_or_else(|| self.fail("an integer too large"), Ok)
    }

    fn tuple(&mut self) -> Result<Value, String> {
        self.at += 1; // '('
        let mut dims = Vec::new();
        let mut comma = false;
        loop {
            self.skip_ws();
            if self.peek() == Some(b')') {
                self.at += 1;
                break;
            }
            if !dims.is_empty() && !comma {
                return self.fail("expected ',' or ')'");
            }
            if dims.len() == MAX_NPY_RANK {
                return self.fail(&format!("a shape of more than {MAX_NPY_RANK} dimensions"));
            }
            dims.push(self.int()?);
            self.skip_ws();
            comma = self.peek() == Some(b',');
            if comma {
                self.at += 1;
            }
        }
        // `(3)` is the int 3 in Python, not a tuple.
        if dims.len() == 1 && !comma {
            return self.fail("a parenthesised integer, not a tuple");
        }
        Ok(Value::Tuple(dims))
    }

    fn value(&mut self) -> Result<Value, String> {
        self.skip_ws();
        match self.peek() {
            Some(b'\'' | b'"') => Ok(Value::Str(self.string()?)),
            Some(b'(') => self.tuple(),
            _ => {
                for (word, v) in [("True", true), ("False", false)] {
                    let end = self.at + word.len();
                    if self.text.get(self.at..end) == Some(word.as_bytes())
                        && !self
                            .text
                            .get(end)
                            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    {
                        self.at = end;
                        return Ok(Value::Bool(v));
                    }
                }
                self.fail("expected a string, True, False or a tuple of integers (a structured dtype or any other value is not read)")
            }
        }
    }

    /// The dictionary, a later value of a key replacing an earlier one.
    fn dict(&mut self) -> Result<BTreeMap<String, Value>, String> {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
        if self.peek() != Some(b'{') {
            return self.fail("expected '{' (the header is a Python dict)");
        }
        self.at += 1;
        let mut out = BTreeMap::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(b'}') {
                self.at += 1;
                break;
            }
            let key = self.string()?;
            self.expect(b':')?;
            let value = self.value()?;
            out.insert(key, value);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {}
                _ => return self.fail("expected ',' or '}'"),
            }
        }
        // What NumPy writes after the dict: spaces, then one newline.
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
        if self.peek() == Some(b'\n') {
            self.at += 1;
        }
        if self.at != self.text.len() {
            return self.fail("text after the dict");
        }
        Ok(out)
    }
}

/// Reads the header dictionary `text` of a `.npy` file of format `version` (1, 2 or 3).
/// Errors say what is wrong (the caller names the file).
pub(crate) fn parse_header_dict(text: &[u8], version: u8) -> Result<NpyHeader, String> {
    if text.len() > MAX_NPY_HEADER {
        return Err(format!(
            "header of {} bytes, more than the {MAX_NPY_HEADER} np.load reads",
            text.len()
        ));
    }
    if let Some(i) = text.iter().position(|b| !b.is_ascii() || *b == 0) {
        return Err(format!(
            "header byte {i} is not ASCII text (0x{:02x})",
            text[i]
        ));
    }
    let mut p = Parser {
        text,
        at: 0,
        python2_ints: version <= 2,
    };
    let mut dict = p.dict()?;
    let keys: Vec<&str> = dict.keys().map(String::as_str).collect();
    if keys != ["descr", "fortran_order", "shape"] {
        return Err(format!(
            "header keys are {keys:?}; NumPy requires exactly descr, fortran_order and shape"
        ));
    }
    let descr = match dict.remove("descr") {
        Some(Value::Str(s)) => s,
        _ => return Err("descr is not a string (structured dtypes are not read)".into()),
    };
    let fortran_order = match dict.remove("fortran_order") {
        Some(Value::Bool(b)) => b,
        _ => return Err("fortran_order is not True or False".into()),
    };
    let shape = match dict.remove("shape") {
        Some(Value::Tuple(t)) => t,
        _ => return Err("shape is not a tuple of integers".into()),
    };
    Ok(NpyHeader {
        descr,
        fortran_order,
        shape,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<NpyHeader, String> {
        parse_header_dict(text.as_bytes(), 1)
    }

    #[test]
    fn what_numpy_writes_is_read() {
        let h = read("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }    \n").unwrap();
        assert_eq!(
            h,
            NpyHeader {
                descr: "<f4".into(),
                fortran_order: false,
                shape: vec![4, 3]
            }
        );
        assert_eq!(
            read("{'descr':'|b1','fortran_order':False,'shape':(5,)}")
                .unwrap()
                .shape,
            vec![5]
        );
        assert_eq!(
            read("{\"descr\":\"<i8\",\"fortran_order\":True,\"shape\":()}\n").unwrap(),
            NpyHeader {
                descr: "<i8".into(),
                fortran_order: true,
                shape: vec![]
            }
        );
        assert_eq!(
            read("{'descr':'<f4','fortran_order':False,'shape':(3L, 4L)}")
                .unwrap()
                .shape,
            vec![3, 4]
        );
        assert!(
            parse_header_dict(b"{'descr':'<f4','fortran_order':False,'shape':(3L,)}", 3).is_err()
        );
    }

    #[test]
    fn a_repeated_key_takes_its_last_value_as_python_does() {
        let h = read(
            "{'descr': '<f4', 'shape': (2,), 'fortran_order': False, 'shape': (1, 2), 'descr': '<i4'}",
        )
        .unwrap();
        assert_eq!((h.descr.as_str(), h.shape), ("<i4", vec![1, 2]));
    }

    #[test]
    fn what_is_not_read_the_numpy_way_is_refused() {
        for bad in [
            "",
            "[]",
            "{'descr': '<f4', 'fortran_order': False}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}",
            "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (+2,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (02,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1_0,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (0x10,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': ((2),)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (True,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
            "{'descr': '<' 'f4', 'fortran_order': False, 'shape': (2,)}",
            "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} # c",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}\n  ",
            "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}",
            "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}",
        ] {
            assert!(read(bad).is_err(), "{bad}");
        }
        let deep = format!("{{'shape': {}", "(".repeat(9_000));
        assert!(read(&deep).is_err());
        let wide = format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': ({})}}",
            "1,".repeat(MAX_NPY_RANK + 1)
        );
        assert!(read(&wide).unwrap_err().contains("more than 64 dimensions"));
        assert!(parse_header_dict(&vec![b' '; MAX_NPY_HEADER + 1], 1).is_err());
    }
}
