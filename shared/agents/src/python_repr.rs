//! JSON values written as Python's `repr` writes the same value (`{'agent_name': 'a'}`,
//! `{'result': None}`): ADK retells other agents' calls and results to a model with
//! `str()` of their Python dicts, and an agent moved from ADK must see the same text.

use serde_json::{Number, Value};

/// `value` as Python's `repr` of the value `json.loads` makes of it. Objects keep the
/// order serde_json gives their keys (sorted), where Python keeps the order they arrived in.
pub(crate) fn python_repr(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(number) => out.push_str(&number_repr(number)),
        Value::String(text) => string_repr(text, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                string_repr(key, out);
                out.push_str(": ");
                write(item, out);
            }
            out.push('}');
        }
    }
}

/// Python's string repr: single quotes unless the text has one and no double quote.
fn string_repr(text: &str, out: &mut String) {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// Python's int or float repr: a float always shows a point or an exponent, and uses the
/// exponent (two digits at least) below 1e-4 and from 1e16 on.
fn number_repr(number: &Number) -> String {
    let Some(float) = number.as_f64().filter(|_| number.is_f64()) else {
        return number.to_string();
    };
    if !float.is_finite() {
        return if float.is_nan() {
            "nan".into()
        } else if float > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let exponent = if float == 0.0 {
        0
    } else {
        float.abs().log10().floor() as i32
    };
    if (-4..16).contains(&exponent) {
        let text = float.to_string();
        if text.contains('.') { text } else { format!("{text}.0") }
    } else {
        let scientific = format!("{float:e}");
        let (mantissa, exponent) = scientific.split_once('e').expect("`{:e}` writes an exponent");
        let (sign, digits) = match exponent.strip_prefix('-') {
            Some(digits) => ('-', digits),
            None => ('+', exponent),
        };
        format!("{mantissa}e{sign}{digits:0>2}")
    }
}

#[cfg(test)]
mod tests {
    use super::python_repr;
    use serde_json::json;

    #[test]
    fn values_are_written_as_python_writes_them() {
        for (value, python) in [
            (json!({"agent_name": "math_tutor"}), "{'agent_name': 'math_tutor'}"),
            (json!({"result": null}), "{'result': None}"),
            (
                json!({"ok": true, "n": 3, "xs": [1.5, false]}),
                "{'ok': True, 'n': 3, 'xs': [1.5, False]}",
            ),
            (json!("it's"), "\"it's\""),
            (json!("a'b\"c\n"), "'a\\'b\"c\\n'"),
            (json!(2.0), "2.0"),
            (json!(0.00001), "1e-05"),
            (json!(1.5e16), "1.5e+16"),
            (json!(0.0001), "0.0001"),
            (json!({}), "{}"),
        ] {
            assert_eq!(python_repr(&value), python, "{value}");
        }
    }
}
