//! `google.protobuf.Struct`, `Value` and `ListValue` as the generated messages use them: a
//! struct that keeps its fields in the order they came.
//!
//! `prost_types::Struct` keeps its fields in a `BTreeMap`, so an object stored and read
//! back comes out with its keys sorted; ADK keeps the order the model or the tool gave
//! (Python dicts do), and a model on the OpenAI-compatible wire reads a call's arguments
//! and a tool's result as JSON text written in that order (docs/adk-conformance.md, "Key
//! order"). A proto3 `map<string, Value>` is on the wire a repeated entry message of
//! `key = 1` and `value = 2`, so a repeated [`FieldsEntry`] is the same encoding: a peer's
//! `Struct` decodes here and ours decodes there. As with a map, the last entry of a key
//! that comes twice is the one that counts ([`Struct::get`]).

pub use prost_types::NullValue;

/// `google.protobuf.Struct`, its fields in their order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Struct {
    #[prost(message, repeated, tag = "1")]
    pub fields: Vec<FieldsEntry>,
}

/// One field of a [`Struct`]: the map entry of `map<string, Value> fields`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FieldsEntry {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<Value>,
}

/// `google.protobuf.Value`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Value {
    #[prost(oneof = "value::Kind", tags = "1, 2, 3, 4, 5, 6")]
    pub kind: Option<value::Kind>,
}

pub mod value {
    /// The kind of a `google.protobuf.Value`; `None` is a value with no kind set.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Kind {
        #[prost(enumeration = "super::NullValue", tag = "1")]
        NullValue(i32),
        #[prost(double, tag = "2")]
        NumberValue(f64),
        #[prost(string, tag = "3")]
        StringValue(String),
        #[prost(bool, tag = "4")]
        BoolValue(bool),
        #[prost(message, tag = "5")]
        StructValue(super::Struct),
        #[prost(message, tag = "6")]
        ListValue(super::ListValue),
    }
}

/// `google.protobuf.ListValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<Value>,
}

impl Struct {
    /// The value of `key`: its last entry, as a map decoder keeps it. A field whose entry
    /// carries no value is a `Value` with no kind, as a map gives it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        const NO_KIND: &Value = &Value { kind: None };
        self.fields
            .iter()
            .rev()
            .find(|entry| entry.key == key)
            .map(|entry| entry.value.as_ref().unwrap_or(NO_KIND))
    }

    /// Sets `key` to `value`: in its place when it is there, else last.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) {
        let key = key.into();
        match self.fields.iter_mut().rev().find(|entry| entry.key == key) {
            Some(entry) => entry.value = Some(value),
            None => self.fields.push(FieldsEntry {
                key,
                value: Some(value),
            }),
        }
    }

    /// The fields in their order (a key that comes twice, twice).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        const NO_KIND: &Value = &Value { kind: None };
        self.fields
            .iter()
            .map(|entry| (entry.key.as_str(), entry.value.as_ref().unwrap_or(NO_KIND)))
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.fields.iter().any(|entry| entry.key == key)
    }

    /// The keys in their order (a key that comes twice, twice).
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.fields.iter().map(|entry| &entry.key)
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// `s["key"]`, as a map is read: the key's value; panics when it has none.
impl std::ops::Index<&str> for Struct {
    type Output = Value;

    fn index(&self, key: &str) -> &Value {
        self.get(key)
            .unwrap_or_else(|| panic!("the struct has no field {key:?}"))
    }
}

impl<K: Into<String>> FromIterator<(K, Value)> for Struct {
    fn from_iter<I: IntoIterator<Item = (K, Value)>>(fields: I) -> Self {
        Struct {
            fields: fields
                .into_iter()
                .map(|(key, value)| FieldsEntry {
                    key: key.into(),
                    value: Some(value),
                })
                .collect(),
        }
    }
}

impl<K: Into<String>, const N: usize> From<[(K, Value); N]> for Struct {
    fn from(fields: [(K, Value); N]) -> Self {
        fields.into_iter().collect()
    }
}

impl From<value::Kind> for Value {
    fn from(kind: value::Kind) -> Self {
        Value { kind: Some(kind) }
    }
}

#[cfg(test)]
mod tests {
    use super::value::Kind;
    use super::*;
    use prost::Message;

    fn string(s: &str) -> Value {
        Kind::StringValue(s.into()).into()
    }

    fn number(n: f64) -> Value {
        Kind::NumberValue(n).into()
    }

    #[test]
    fn a_struct_decodes_with_its_fields_in_the_order_they_were_written() {
        let written = Struct::from([("zeta", string("z")), ("alpha", number(1.0)), ("mid", string("m"))]);
        let read = Struct::decode(written.encode_to_vec().as_slice()).unwrap();
        let keys: Vec<&str> = read.iter().map(|(key, _)| key).collect();
        assert_eq!(keys, ["zeta", "alpha", "mid"]);
        assert_eq!(read, written);
    }

    #[test]
    fn the_encoding_is_the_well_known_struct_both_ways() {
        let nested = Struct::from([(
            "b",
            Value::from(Kind::ListValue(ListValue {
                values: vec![number(2.5)],
            })),
        )]);
        let ours = Struct::from([
            ("text", string("hi")),
            ("null", Kind::NullValue(NullValue::NullValue as i32).into()),
            ("yes", Kind::BoolValue(true).into()),
            ("inner", Kind::StructValue(nested).into()),
        ]);
        let theirs = prost_types::Struct::decode(ours.encode_to_vec().as_slice()).unwrap();
        let inner = match &theirs.fields["inner"].kind {
            Some(prost_types::value::Kind::StructValue(inner)) => inner,
            other => panic!("inner decoded as {other:?}"),
        };
        assert_eq!(
            inner.fields["b"].kind,
            Some(prost_types::value::Kind::ListValue(prost_types::ListValue {
                values: vec![prost_types::Value {
                    kind: Some(prost_types::value::Kind::NumberValue(2.5))
                }]
            }))
        );
        assert_eq!(
            theirs.fields["text"].kind,
            Some(prost_types::value::Kind::StringValue("hi".into()))
        );
        assert_eq!(theirs.fields.len(), 4);
        let back = Struct::decode(theirs.encode_to_vec().as_slice()).unwrap();
        // prost_types wrote its fields sorted; the content is the same.
        let keys: Vec<&str> = back.iter().map(|(key, _)| key).collect();
        assert_eq!(keys, ["inner", "null", "text", "yes"]);
        for (key, value) in ours.iter() {
            assert_eq!(back.get(key), Some(value), "{key}");
        }
    }

    #[test]
    fn a_key_written_twice_reads_as_its_last_value_and_insert_replaces_it_in_place() {
        let mut twice = Struct::from([("k", string("first")), ("other", string("o")), ("k", string("last"))]);
        assert_eq!(twice.get("k"), Some(&string("last")));
        twice.insert("other", string("new"));
        twice.insert("added", string("a"));
        let keys: Vec<&str> = twice.iter().map(|(key, _)| key).collect();
        assert_eq!(keys, ["k", "other", "k", "added"]);
        assert_eq!(twice.get("other"), Some(&string("new")));
        assert_eq!(twice.get("missing"), None);
    }

    #[test]
    fn an_entry_without_a_value_reads_as_a_value_with_no_kind() {
        let bare = Struct {
            fields: vec![FieldsEntry {
                key: "k".into(),
                value: None,
            }],
        };
        let read = Struct::decode(bare.encode_to_vec().as_slice()).unwrap();
        assert_eq!(read.get("k"), Some(&Value { kind: None }));
    }
}
