//! The checks' expressions: comparisons of status feedback values joined by `&&`.
//!
//! ```text
//! expr    := compare ('&&' compare)*
//! compare := operand ('==' | '!=' | '<' | '<=' | '>' | '>=') operand
//! operand := NAME | INTEGER | "string" | true | false
//! ```
//!
//! A NAME is a feedback value's name (`ReadyReplicas`, or a JSONPaths rule's name). An
//! expression whose values are not all reported yet is neither true nor false: the
//! cluster is not judged until they are.

use std::collections::BTreeMap;
use std::fmt;

/// A feedback value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    Integer(i64),
    String(String),
    Boolean(bool),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Integer(n) => write!(f, "{n}"),
            Value::String(s) => write!(f, "{s:?}"),
            Value::Boolean(b) => write!(f, "{b}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Operand {
    Name(String),
    Literal(Value),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    text: String,
    all: Vec<(Operand, Op, Operand)>,
}

/// What an expression says of some values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    True,
    /// False, with the first comparison that failed and its values.
    False(String),
    /// A value it names is not reported.
    Unknown(String),
}

impl Expr {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut all = Vec::new();
        for part in text.split("&&") {
            all.push(compare(part.trim())?);
        }
        Ok(Self {
            text: text.trim().to_string(),
            all,
        })
    }

    pub fn eval(&self, values: &BTreeMap<String, Value>) -> Outcome {
        let show = |o: &Operand, v: &Value| match o {
            Operand::Name(n) => format!("{n}={v}"),
            Operand::Literal(_) => v.to_string(),
        };
        for (a, op, b) in &self.all {
            let get = |o: &Operand| match o {
                Operand::Literal(v) => Ok(v.clone()),
                Operand::Name(n) => values.get(n).cloned().ok_or_else(|| n.clone()),
            };
            let (x, y) = match (get(a), get(b)) {
                (Ok(x), Ok(y)) => (x, y),
                (Err(n), _) | (_, Err(n)) => {
                    return Outcome::Unknown(format!("{n} is not reported"));
                }
            };
            // Values of two types have no order, and are never equal: say so rather
            // than judge by the order of the enum's variants.
            if std::mem::discriminant(&x) != std::mem::discriminant(&y) {
                return Outcome::Unknown(format!(
                    "{} and {} are not of one type",
                    show(a, &x),
                    show(b, &y)
                ));
            }
            let holds = match op {
                Op::Eq => x == y,
                Op::Ne => x != y,
                Op::Lt => x < y,
                Op::Le => x <= y,
                Op::Gt => x > y,
                Op::Ge => x >= y,
            };
            if !holds {
                return Outcome::False(format!("{} {} {}", show(a, &x), op_str(*op), show(b, &y)));
            }
        }
        Outcome::True
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn op_str(op: Op) -> &'static str {
    match op {
        Op::Eq => "==",
        Op::Ne => "!=",
        Op::Lt => "<",
        Op::Le => "<=",
        Op::Gt => ">",
        Op::Ge => ">=",
    }
}

fn compare(part: &str) -> Result<(Operand, Op, Operand), String> {
    // Longest operators first, so "<=" is not read as "<".
    const OPS: [(&str, Op); 6] = [
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];
    for (text, op) in OPS {
        if let Some((a, b)) = part.split_once(text) {
            return Ok((operand(a.trim())?, op, operand(b.trim())?));
        }
    }
    Err(format!("{part:?} is no comparison (==, !=, <, <=, >, >=)"))
}

fn operand(s: &str) -> Result<Operand, String> {
    if s.is_empty() {
        return Err("a comparison lacks an operand".into());
    }
    if let Ok(n) = s.parse::<i64>() {
        return Ok(Operand::Literal(Value::Integer(n)));
    }
    match s {
        "true" => return Ok(Operand::Literal(Value::Boolean(true))),
        "false" => return Ok(Operand::Literal(Value::Boolean(false))),
        _ => {}
    }
    if let Some(inner) = s.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        return Ok(Operand::Literal(Value::String(inner.to_string())));
    }
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    {
        return Ok(Operand::Name(s.to_string()));
    }
    Err(format!("{s:?} is neither a value name nor a literal"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn values(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn comparisons_of_reported_values() {
        let e = Expr::parse("ReadyReplicas == Replicas && Replicas >= 1").unwrap();
        let v = |ready| {
            values(&[
                ("ReadyReplicas", Value::Integer(ready)),
                ("Replicas", Value::Integer(3)),
            ])
        };
        assert_eq!(e.eval(&v(3)), Outcome::True);
        assert_eq!(
            e.eval(&v(1)),
            Outcome::False("ReadyReplicas=1 == Replicas=3".into())
        );
        assert_eq!(
            e.eval(&values(&[("Replicas", Value::Integer(3))])),
            Outcome::Unknown("ReadyReplicas is not reported".into())
        );
        let s = Expr::parse(r#"phase != "Failed" && healthy == true"#).unwrap();
        let ok = values(&[
            ("phase", Value::String("Running".into())),
            ("healthy", Value::Boolean(true)),
        ]);
        assert_eq!(s.eval(&ok), Outcome::True);
    }

    #[test]
    fn what_cannot_be_parsed_says_why() {
        for bad in ["ReadyReplicas", "a == ", "a = b", "a == $x"] {
            assert!(Expr::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_of_two_types_are_neither_equal_nor_ordered() {
        let e = Expr::parse("Phase < 1").unwrap();
        let values = BTreeMap::from([("Phase".to_string(), Value::String("0".into()))]);
        assert_eq!(
            e.eval(&values),
            Outcome::Unknown("Phase=\"0\" and 1 are not of one type".into())
        );
        let e = Expr::parse("Phase != 1").unwrap();
        assert!(matches!(e.eval(&values), Outcome::Unknown(_)));
    }
}
