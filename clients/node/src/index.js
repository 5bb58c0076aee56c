// @ts-check
// Node.js client of the ADK gRPC services. See ../README.md.
export {
  AdkClient,
  DEFAULT_PROTO_DIR,
  LOADER_OPTIONS,
  eventText,
  functionCalls,
  functionResponse,
  loadAdkV1,
  stateDelta,
} from './client.js';
export { fromStruct, fromValue, fromValueMap, toDate, toStruct, toValue, toValueMap } from './struct.js';
export { default as grpc } from '@grpc/grpc-js';
