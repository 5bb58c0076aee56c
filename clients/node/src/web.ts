// adk-client for browsers: gRPC-Web (Connect's gRPC-Web transport on fetch), for servers started
// with --grpc-web (and --cors-allowed-origins for pages of another origin).
import { createGrpcWebTransport } from '@connectrpc/connect-web';
import { AdkClient, type AdkClientOptions } from './client.js';

export * from './common.js';
export { createGrpcWebTransport };

/** A client of the server at `baseUrl` (`http://localhost:50051`) over gRPC-Web. */
export function connectWeb(baseUrl: string, options: AdkClientOptions = {}): AdkClient {
  return new AdkClient(createGrpcWebTransport({ baseUrl }), options);
}
