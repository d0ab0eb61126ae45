//! Tool fingerprints: a stable hash of what a model relies on in a tool (description, input and
//! output schemas, annotations), over a canonical JSON encoding, so that a reconcile can tell a
//! changed tool from an unchanged one without comparing schemas.

use std::fmt;
use std::sync::LazyLock;

use serde_json::Value;
use xxhash_rust::xxh3::Xxh3Default;

use crate::tool::Tool;

/// A stable hash of a tool's description, input schema, output schema and annotations.
///
/// It is the same across runs and machines, and does not depend on the order of keys in JSON
/// objects. Title, icons and `_meta` are not part of it: they do not change how a model calls
/// the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub u64);

impl Fingerprint {
    /// The fingerprint of a tool.
    pub fn of(tool: &Tool) -> Self {
        let mut h = Canon::new();
        match &tool.description {
            Some(d) => {
                h.update(&[1]);
                hash_str(&mut h, d);
            }
            None => h.update(&[0]),
        }
        hash_object(&mut h, &tool.input_schema, *MAPS_ARE_SORTED);
        for part in [&tool.output_schema, &tool.annotations] {
            match part {
                Some(v) => {
                    h.update(&[1]);
                    hash_value(&mut h, v);
                }
                None => h.update(&[0]),
            }
        }
        Fingerprint(h.digest())
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Whether `serde_json::Map` iterates in key order. It does unless some crate in the build turns
/// on serde_json's `preserve_order`, which makes it iterate in insertion order; fingerprints
/// must not depend on which, so objects are then hashed with their keys sorted.
static MAPS_ARE_SORTED: LazyLock<bool> = LazyLock::new(|| {
    let mut map = serde_json::Map::new();
    map.insert("b".into(), Value::Null);
    map.insert("a".into(), Value::Null);
    map.keys().next().is_some_and(|k| k == "a")
});

/// The canonical encoding on its way into xxh3, gathered in a stack buffer first: the encoding
/// comes in pieces of a few bytes, and one streaming update per piece costs more than the
/// hashing itself. Chunking does not change a streaming hash, so neither does the buffer.
struct Canon {
    hasher: Xxh3Default,
    buf: [u8; CANON_BUF],
    len: usize,
}

const CANON_BUF: usize = 512;

impl Canon {
    fn new() -> Self {
        Canon {
            hasher: Xxh3Default::new(),
            buf: [0; CANON_BUF],
            len: 0,
        }
    }

    #[inline]
    fn update(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() > CANON_BUF {
            self.hasher.update(&self.buf[..self.len]);
            self.len = 0;
            if bytes.len() > CANON_BUF {
                self.hasher.update(bytes);
                return;
            }
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn digest(mut self) -> u64 {
        self.hasher.update(&self.buf[..self.len]);
        self.len = 0;
        self.hasher.digest()
    }
}

fn hash_str(h: &mut Canon, s: &str) {
    h.update(&(s.len() as u64).to_le_bytes());
    h.update(s.as_bytes());
}

/// Feeds a canonical encoding of `value` to the hasher: a tag per type, lengths before
/// contents (so no two values share an encoding), object keys in sorted order.
fn hash_value(h: &mut Canon, value: &Value) {
    hash_value_with(h, value, *MAPS_ARE_SORTED);
}

/// [`hash_value`], told whether map iteration is already in key order.
fn hash_value_with(h: &mut Canon, value: &Value, maps_are_sorted: bool) {
    match value {
        Value::Null => h.update(&[0]),
        Value::Bool(false) => h.update(&[1]),
        Value::Bool(true) => h.update(&[2]),
        Value::Number(n) => {
            let (tag, bits) = if let Some(u) = n.as_u64() {
                (3, u)
            } else if let Some(i) = n.as_i64() {
                (4, i as u64)
            } else {
                (5, n.as_f64().map_or(0, f64::to_bits))
            };
            let mut bytes = [tag; 9];
            bytes[1..].copy_from_slice(&bits.to_le_bytes());
            h.update(&bytes);
        }
        Value::String(s) => {
            h.update(&[6]);
            hash_str(h, s);
        }
        Value::Array(items) => {
            h.update(&[7]);
            h.update(&(items.len() as u64).to_le_bytes());
            for item in items {
                hash_value_with(h, item, maps_are_sorted);
            }
        }
        Value::Object(map) => hash_object(h, map, maps_are_sorted),
    }
}

/// [`hash_value_with`] of a JSON object, its keys in sorted order whatever the map's own order.
fn hash_object(h: &mut Canon, map: &serde_json::Map<String, Value>, maps_are_sorted: bool) {
    h.update(&[8]);
    h.update(&(map.len() as u64).to_le_bytes());
    if maps_are_sorted {
        for (key, item) in map {
            hash_str(h, key);
            hash_value_with(h, item, maps_are_sorted);
        }
    } else {
        let mut entries: Vec<_> = map.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (key, item) in entries {
            hash_str(h, key);
            hash_value_with(h, item, maps_are_sorted);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// A JSON object literal as a map.
    fn schema(value: Value) -> serde_json::Map<String, Value> {
        let Value::Object(map) = value else {
            panic!("not an object: {value}")
        };
        map
    }

    #[test]
    fn fingerprint_ignores_key_order_and_sees_nesting() {
        let mut one = serde_json::Map::new();
        one.insert("type".into(), json!("object"));
        one.insert(
            "properties".into(),
            json!({"a": {"type": "string"}, "b": {"type": "integer"}}),
        );
        let mut two = serde_json::Map::new();
        two.insert(
            "properties".into(),
            json!({"b": {"type": "integer"}, "a": {"type": "string"}}),
        );
        two.insert("type".into(), json!("object"));
        let t1 = Tool::new("t").with_input_schema(one);
        let t2 = Tool::new("t").with_input_schema(two);
        assert_eq!(Fingerprint::of(&t1), Fingerprint::of(&t2));
        let swapped = Tool::new("t").with_input_schema(schema(
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}),
    ));
        assert_ne!(Fingerprint::of(&t1), Fingerprint::of(&swapped));
        let moved = Tool::new("t").with_input_schema(schema(json!({"type": "object"})));
        let as_output = Tool {
            output_schema: Some(Box::new(json!({"type": "object"}))),
            ..Tool::new("t").with_input_schema(schema(json!({})))
        };
        assert_ne!(Fingerprint::of(&moved), Fingerprint::of(&as_output));
        let items = |list: Value| schema(json!({"enum": list}));
        assert_ne!(
            Fingerprint::of(&Tool::new("t").with_input_schema(items(json!([1, 2])))),
            Fingerprint::of(&Tool::new("t").with_input_schema(items(json!([2, 1]))))
        );
    }

    #[test]
    fn fingerprint_is_stable_across_runs() {
        // Fixed input, fixed output: a change here means every deployed fingerprint changes.
        let tool = Tool::new("t")
            .with_description("d")
            .with_input_schema(schema(json!({"type": "object", "required": ["a"]})));
        assert_eq!(Fingerprint::of(&tool).to_string(), "8952a8260712dc49");
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            "[a-z]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-e]{1,2}", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn value_fingerprint(v: &Value, sorted: bool) -> u64 {
        let mut h = Canon::new();
        hash_value_with(&mut h, v, sorted);
        h.digest()
    }

    /// `v` with every object's keys inserted in ascending (or descending) order; with
    /// `preserve_order` that is the order they iterate in.
    fn with_key_order(v: &Value, descending: bool) -> Value {
        match v {
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|i| with_key_order(i, descending))
                    .collect(),
            ),
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                if descending {
                    keys.reverse();
                }
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), with_key_order(&map[k], descending)))
                        .collect(),
                )
            }
            other => other.clone(),
        }
    }

    proptest! {
        /// The sorting fallback hashes like the sorted iteration, whatever order the keys were
        /// inserted in, and the fingerprint tells values apart.
        #[test]
        fn fingerprint_paths_agree_and_separate(a in json_value(), b in json_value()) {
            let sorted = with_key_order(&a, false);
            let reversed = with_key_order(&a, true);
            prop_assert_eq!(value_fingerprint(&sorted, true), value_fingerprint(&a, false));
            prop_assert_eq!(value_fingerprint(&reversed, false), value_fingerprint(&a, false));
            prop_assert_eq!(value_fingerprint(&a, *MAPS_ARE_SORTED), value_fingerprint(&a, false));
            if a != b {
                prop_assert_ne!(value_fingerprint(&a, false), value_fingerprint(&b, false));
            }
        }
    }
}
