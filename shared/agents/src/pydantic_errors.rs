//! pydantic's `ValidationError` text, for the values the runner validates in Rust as
//! pydantic would ([`crate::json_schema::PydanticClass`]): ADK hands that text to the
//! model when a call's arguments miss a schema (`finish_task`), and an agent moved from ADK
//! must read the same words. The layout is pydantic-core's: a count line, then per error
//! its location, its message with its type, input and input's Python type, and a link to
//! the error's docs.

use crate::python_repr::python_repr;
use serde_json::Value;
use std::fmt;

/// The pydantic version (major.minor) of the venv the conformance cases are recorded with
/// ADK 2.13 in: pydantic links each error to that version's docs.
pub(crate) const PYDANTIC_VERSION_OF_ADK_RECORDINGS: &str = "2.14";

/// An input's repr longer than this (in bytes) is shown cut in the middle, as pydantic shows it.
const INPUT_REPR_LIMIT: usize = 50;
/// What is kept of a cut repr: its start and its end.
const INPUT_REPR_HEAD: usize = 25;
const INPUT_REPR_TAIL: usize = 24;

/// The kinds of pydantic errors a model's arguments can hit (pydantic's error types).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ErrorKind {
    Missing,
    ExtraForbidden,
    StringType,
    IntType,
    IntParsing,
    IntParsingSize,
    IntFromFloat,
    FloatType,
    FloatParsing,
    BoolType,
    BoolParsing,
    ListType,
    DictType,
    /// Not a dict nor an instance of the class named.
    ModelType(String),
    /// Not one of an `Enum` class's values (their reprs, as pydantic lists them).
    Enum(String),
    /// Not one of a `Literal`'s values.
    Literal(String),
}

impl ErrorKind {
    /// pydantic's name of the error type (`type=` in the text, the docs page's name).
    fn code(&self) -> &'static str {
        match self {
            ErrorKind::Missing => "missing",
            ErrorKind::ExtraForbidden => "extra_forbidden",
            ErrorKind::StringType => "string_type",
            ErrorKind::IntType => "int_type",
            ErrorKind::IntParsing => "int_parsing",
            ErrorKind::IntParsingSize => "int_parsing_size",
            ErrorKind::IntFromFloat => "int_from_float",
            ErrorKind::FloatType => "float_type",
            ErrorKind::FloatParsing => "float_parsing",
            ErrorKind::BoolType => "bool_type",
            ErrorKind::BoolParsing => "bool_parsing",
            ErrorKind::ListType => "list_type",
            ErrorKind::DictType => "dict_type",
            ErrorKind::ModelType(_) => "model_type",
            ErrorKind::Enum(_) => "enum",
            ErrorKind::Literal(_) => "literal_error",
        }
    }

    /// pydantic's message for it.
    fn message(&self) -> String {
        match self {
            ErrorKind::Missing => "Field required".into(),
            ErrorKind::ExtraForbidden => "Extra inputs are not permitted".into(),
            ErrorKind::StringType => "Input should be a valid string".into(),
            ErrorKind::IntType => "Input should be a valid integer".into(),
            ErrorKind::IntParsing => "Input should be a valid integer, unable to parse string as an integer".into(),
            ErrorKind::IntParsingSize => "Unable to parse input string as an integer, exceeded maximum size".into(),
            ErrorKind::IntFromFloat => "Input should be a valid integer, got a number with a fractional part".into(),
            ErrorKind::FloatType => "Input should be a valid number".into(),
            ErrorKind::FloatParsing => "Input should be a valid number, unable to parse string as a number".into(),
            ErrorKind::BoolType => "Input should be a valid boolean".into(),
            ErrorKind::BoolParsing => "Input should be a valid boolean, unable to interpret input".into(),
            ErrorKind::ListType => "Input should be a valid list".into(),
            ErrorKind::DictType => "Input should be a valid dictionary".into(),
            ErrorKind::ModelType(class) => format!("Input should be a valid dictionary or instance of {class}"),
            ErrorKind::Enum(expected) | ErrorKind::Literal(expected) => format!("Input should be {expected}"),
        }
    }
}

/// The values an `Enum` or a `Literal` takes as pydantic lists them in its message:
/// `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'`.
pub(crate) fn expected_choices(choices: &[Value]) -> String {
    let reprs: Vec<String> = choices.iter().map(python_repr).collect();
    match reprs.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// One way a value misses a schema: what, where (field names and list indexes, outermost
/// first) and the input found there.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LineError {
    pub(crate) kind: ErrorKind,
    pub(crate) location: Vec<String>,
    pub(crate) input: Value,
}

/// pydantic's `ValidationError` of a value of the type named `title`: its `str()` is the
/// text ADK hands the model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ValidationError {
    pub(crate) title: String,
    pub(crate) errors: Vec<LineError>,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.errors.len();
        let plural = if count == 1 { "" } else { "s" };
        write!(f, "{count} validation error{plural} for {}", self.title)?;
        for error in &self.errors {
            f.write_str("\n")?;
            if !error.location.is_empty() {
                writeln!(f, "{}", error.location.join("."))?;
            }
            let code = error.kind.code();
            write!(
                f,
                "  {} [type={code}, input_value={}, input_type={}]\n    For further information visit \
                 https://errors.pydantic.dev/{PYDANTIC_VERSION_OF_ADK_RECORDINGS}/v/{code}",
                error.kind.message(),
                input_repr(&error.input),
                python_type_name(&error.input),
            )?;
        }
        Ok(())
    }
}

/// The input's Python repr, cut in the middle when long, as pydantic shows it: counted in
/// UTF-8 bytes, each cut moved off the middle of a character (the start's back, the end's on).
fn input_repr(input: &Value) -> String {
    let repr = python_repr(input);
    if repr.len() <= INPUT_REPR_LIMIT {
        return repr;
    }
    let mut head = INPUT_REPR_HEAD;
    while !repr.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = repr.len() - INPUT_REPR_TAIL;
    while !repr.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}...{}", &repr[..head], &repr[tail..])
}

/// The Python type of the value `json.loads` makes of `input`.
fn python_type_name(input: &Value) -> &'static str {
    match input {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(number) if number.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}
