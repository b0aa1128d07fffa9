//! Applying a policy's edits to the client's JSON body. The host audits every
//! edit: a policy may not rename the model (that is routing and billing),
//! flip streaming (the host has already chosen how to answer), turn off the
//! usage an OpenAI-style stream reports (`stream_options.include_usage`: that
//! is billing), nor replace the whole body — nor remove or replace any of
//! these through a parent.

use serde_json::Value;

/// Body members a policy may not touch.
const PROTECTED: &[&str] = &["/model", "/stream", "/stream_options/include_usage"];

#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    Remove(String),
    Set { pointer: String, value: String },
    SetIfAbsent { pointer: String, value: String },
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn check_pointer(pointer: &str) -> Result<(), String> {
    if pointer.is_empty() || !pointer.starts_with('/') {
        return Err(format!("`{pointer}` is not a JSON pointer below the root"));
    }
    let touches = |p: &str| {
        // The member itself, something inside it, or a parent that holds it.
        pointer == p
            || pointer.starts_with(&format!("{p}/"))
            || p.starts_with(&format!("{pointer}/"))
    };
    if PROTECTED.iter().any(|p| touches(p)) {
        return Err(format!("editing `{pointer}` is not allowed"));
    }
    Ok(())
}

/// Splits `/a/b/c` into the parent pointer `/a/b` and the last token `c`.
fn split(pointer: &str) -> (&str, String) {
    match pointer.rfind('/') {
        Some(i) => (&pointer[..i], unescape(&pointer[i + 1..])),
        None => ("", unescape(pointer)),
    }
}

/// Applies one edit. Removing something absent is not an error; setting below
/// a parent that does not exist is.
pub fn apply(body: &mut Value, edit: &Edit) -> Result<(), String> {
    match edit {
        Edit::Remove(ptr) => {
            check_pointer(ptr)?;
            let (parent, key) = split(ptr);
            match body.pointer_mut(parent) {
                Some(Value::Object(m)) => {
                    m.remove(&key);
                }
                Some(Value::Array(a)) => {
                    if let Ok(i) = key.parse::<usize>() {
                        if i < a.len() {
                            a.remove(i);
                        }
                    }
                }
                _ => {}
            }
            Ok(())
        }
        Edit::Set { pointer, value } | Edit::SetIfAbsent { pointer, value } => {
            check_pointer(pointer)?;
            let only_if_absent = matches!(edit, Edit::SetIfAbsent { .. });
            let value: Value = serde_json::from_str(value)
                .map_err(|e| format!("value for `{pointer}` is not JSON: {e}"))?;
            let (parent, key) = split(pointer);
            match body.pointer_mut(parent) {
                Some(Value::Object(m)) => {
                    if !(only_if_absent && m.contains_key(&key)) {
                        m.insert(key, value);
                    }
                    Ok(())
                }
                Some(Value::Array(a)) => {
                    if key == "-" {
                        a.push(value);
                        return Ok(());
                    }
                    let i: usize = key
                        .parse()
                        .map_err(|_| format!("`{key}` is not an array index in `{pointer}`"))?;
                    let len = a.len();
                    if i == len {
                        a.push(value);
                    } else if i > len {
                        return Err(format!("index {i} is past the end in `{pointer}`"));
                    } else if !only_if_absent {
                        a[i] = value;
                    }
                    Ok(())
                }
                _ => Err(format!("the parent of `{pointer}` does not exist")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn edits() {
        let mut b = json!({"model":"m","temperature":0.2,"top_p":1,"a":{"b~/c":1},"l":[1,2]});
        apply(&mut b, &Edit::Remove("/temperature".into())).unwrap();
        apply(&mut b, &Edit::Remove("/missing".into())).unwrap();
        apply(&mut b, &Edit::Remove("/a/b~0~1c".into())).unwrap();
        apply(
            &mut b,
            &Edit::Set {
                pointer: "/l/0".into(),
                value: "9".into(),
            },
        )
        .unwrap();
        apply(
            &mut b,
            &Edit::Set {
                pointer: "/l/-".into(),
                value: "3".into(),
            },
        )
        .unwrap();
        apply(
            &mut b,
            &Edit::SetIfAbsent {
                pointer: "/top_p".into(),
                value: "0.5".into(),
            },
        )
        .unwrap();
        apply(
            &mut b,
            &Edit::SetIfAbsent {
                pointer: "/n".into(),
                value: "1".into(),
            },
        )
        .unwrap();
        assert_eq!(b, json!({"model":"m","top_p":1,"a":{},"l":[9,2,3],"n":1}));
    }

    #[test]
    fn refused_edits() {
        let mut b = json!({"model":"m","stream":true,"stream_options":{"include_usage":true}});
        for e in [
            Edit::Remove("/model".into()),
            Edit::Remove("/stream_options".into()),
            Edit::Remove("/stream_options/include_usage".into()),
            Edit::Set {
                pointer: "/stream_options".into(),
                value: "{}".into(),
            },
            Edit::Set {
                pointer: "/stream_options/include_usage".into(),
                value: "false".into(),
            },
            Edit::Set {
                pointer: "/stream".into(),
                value: "false".into(),
            },
            Edit::Set {
                pointer: "".into(),
                value: "{}".into(),
            },
            Edit::Set {
                pointer: "/x/y".into(),
                value: "1".into(),
            },
            Edit::Set {
                pointer: "/x".into(),
                value: "not json".into(),
            },
        ] {
            assert!(apply(&mut b, &e).is_err(), "{e:?}");
        }
        assert_eq!(
            b,
            json!({"model":"m","stream":true,"stream_options":{"include_usage":true}})
        );
        // Its siblings stay editable, and so do look-alike names.
        for e in [
            Edit::Set {
                pointer: "/stream_options/include_obfuscation".into(),
                value: "false".into(),
            },
            Edit::Set {
                pointer: "/streaming_hint".into(),
                value: "1".into(),
            },
        ] {
            assert!(apply(&mut b, &e).is_ok(), "{e:?}");
        }
    }
}
