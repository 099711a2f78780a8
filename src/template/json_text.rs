//! JSON text as the agent's files are written: keys sorted, two-space
//! indent, `": "` between key and value, non-ASCII and control characters
//! as `\uXXXX` escapes, and a final newline. That is what Python's
//! `json.dumps(value, sort_keys=True, indent=2)` writes, the form the
//! reference's tools produce and read, so identical inputs give identical
//! bytes whichever side wrote them.

use std::fmt::Write as _;

use serde_json::Value;

/// The whole document, with its final newline.
pub(crate) fn document(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out.push('\n');
    out
}

/// One JSON string literal, escaped as [`document`] escapes strings.
pub(crate) fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    write_string(&mut out, text);
    out
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn write_value(out: &mut String, value: &Value, depth: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(out, s),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, depth + 1);
                write_value(out, item, depth + 1);
            }
            out.push('\n');
            indent(out, depth);
            out.push(']');
        }
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Object(map) => {
            // Sorted here, whatever order the map keeps (serde_json keeps
            // insertion order when another crate turns on `preserve_order`).
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push_str("{\n");
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, depth + 1);
                write_string(out, key);
                out.push_str(": ");
                write_value(out, item, depth + 1);
            }
            out.push('\n');
            indent(out, depth);
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    // Writing to a String cannot fail.
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_what_python_json_dumps_writes() {
        // json.dumps(v, sort_keys=True, indent=2) + "\n" for the same value.
        let v = json!({
            "b": [1, 0.5, null, true],
            "a": {"z": "", "y": {}},
            "c": [],
            "é": "ü \u{1F600} \u{7f} \u{1b} \"q\" \\ \t",
        });
        assert_eq!(
            document(&v),
            "{\n  \"a\": {\n    \"y\": {},\n    \"z\": \"\"\n  },\n  \"b\": [\n    1,\n    0.5,\n    null,\n    true\n  ],\n  \"c\": [],\n  \"\\u00e9\": \"\\u00fc \\ud83d\\ude00 \\u007f \\u001b \\\"q\\\" \\\\ \\t\"\n}\n"
        );
        assert_eq!(document(&json!({})), "{}\n");
        assert_eq!(string("a/b"), "\"a/b\"");
    }
}
