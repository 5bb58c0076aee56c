// @ts-check
// Conversions between google.protobuf.Struct / Value (as @grpc/proto-loader represents
// them with oneofs: true) and plain JSON-like JavaScript values.

/** @typedef {null | boolean | number | string | any[] | {[key: string]: any}} JsonValue  a JSON value */

/**
 * A plain JS value as a google.protobuf.Value message object.
 * @param {JsonValue} value
 * @returns {object}
 */
export function toValue(value) {
  if (value === null) return { nullValue: 'NULL_VALUE' };
  switch (typeof value) {
    case 'boolean':
      return { boolValue: value };
    case 'number':
      return { numberValue: value };
    case 'string':
      return { stringValue: value };
    case 'object':
      if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
      return { structValue: toStruct(value) };
    default:
      throw new TypeError(`not a JSON value: ${typeof value}`);
  }
}

const VALUE_KINDS = ['nullValue', 'numberValue', 'stringValue', 'boolValue', 'structValue', 'listValue'];

/**
 * A google.protobuf.Value message object (as loaded or built by toValue) as a plain JS value.
 * @param {any} value
 * @returns {JsonValue}
 */
export function fromValue(value) {
  if (value == null) return null;
  // Loaded messages name their oneof member in `kind`; objects built by toValue do not.
  const kind = value.kind ?? VALUE_KINDS.find((k) => value[k] !== undefined && value[k] !== null);
  switch (kind) {
    case 'boolValue':
      return value.boolValue;
    case 'numberValue':
      return value.numberValue;
    case 'stringValue':
      return value.stringValue;
    case 'listValue':
      return (value.listValue.values ?? []).map(fromValue);
    case 'structValue':
      return fromStruct(value.structValue);
    default: // nullValue, or unset
      return null;
  }
}

/**
 * A plain object as a google.protobuf.Struct message object.
 * @param {{[key: string]: JsonValue} | undefined | null} object
 */
export function toStruct(object) {
  /** @type {{[key: string]: object}} */
  const fields = {};
  for (const [key, value] of Object.entries(object ?? {})) fields[key] = toValue(value);
  return { fields };
}

/**
 * A google.protobuf.Struct message object (as loaded) as a plain object.
 * @param {any} struct
 * @returns {{[key: string]: JsonValue}}
 */
export function fromStruct(struct) {
  return fromValueMap(struct?.fields);
}

/**
 * A map<string, Value> field (e.g. EventActions.state_delta) to a plain object and back.
 * @param {{[key: string]: any} | undefined | null} map
 * @returns {{[key: string]: JsonValue}}
 */
export function fromValueMap(map) {
  /** @type {{[key: string]: JsonValue}} */
  const out = {};
  for (const [key, value] of Object.entries(map ?? {})) out[key] = fromValue(value);
  return out;
}

/** @param {{[key: string]: JsonValue} | undefined | null} object */
export function toValueMap(object) {
  return toStruct(object).fields;
}

/**
 * A google.protobuf.Timestamp (int64 seconds as a string) as a Date; null when unset.
 * @param {any} ts
 * @returns {Date | null}
 */
export function toDate(ts) {
  if (!ts) return null;
  return new Date(Number(ts.seconds) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6));
}
