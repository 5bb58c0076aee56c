// Struct <-> plain object conversions, without a server.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import protoLoader from '@grpc/proto-loader';
import { DEFAULT_PROTO_DIR, LOADER_OPTIONS, fromStruct, fromValue, toDate, toStruct, toValue } from '../src/index.js';

test('plain values round-trip through Struct', () => {
  const value = { s: 'x', i: 2, f: 0.5, t: true, n: null, l: [1, [2], { k: 'v' }], d: { e: {} } };
  assert.deepEqual(fromStruct(toStruct(value)), value);
});

test('round-trips through the wire encoding as loaded with the client options', () => {
  const def = protoLoader.loadSync('adk/v1/content.proto', { ...LOADER_OPTIONS, includeDirs: [DEFAULT_PROTO_DIR] });
  const Struct = def['google.protobuf.Struct'];
  const value = { a: [1, 'b', null, { c: false }], d: 1.25 };
  const bytes = Struct.serialize(toStruct(value));
  assert.deepEqual(fromStruct(Struct.deserialize(bytes)), value);
});

test('unset values are null; non-JSON values throw', () => {
  assert.equal(fromValue(undefined), null);
  assert.equal(fromValue({}), null);
  assert.throws(() => toValue(/** @type {any} */ (undefined)), TypeError);
  assert.throws(() => toValue(/** @type {any} */ (() => 1)), TypeError);
});

test('timestamps become Dates', () => {
  assert.equal(toDate({ seconds: '1700000000', nanos: 500000000 })?.toISOString(), '2023-11-14T22:13:20.500Z');
  assert.equal(toDate(null), null);
});
