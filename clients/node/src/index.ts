// adk-client for Node.js: gRPC over HTTP/2 (Connect's gRPC transport on node:http2), plus
// artifact uploads from and downloads to files.
import { createReadStream, createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { createGrpcTransport } from '@connectrpc/connect-node';
import type { Transport } from '@connectrpc/connect';
import { AdkClient, type AdkClientOptions, type ArtifactSource, type CallOpts, type Int64 } from './client.js';
import type { ArtifactMetadataView } from './views.js';

export * from './common.js';
export { createGrpcTransport };

/** `host:port` or a URL: `http://…` plain text, `https://…` TLS. */
function baseUrl(target: string): string {
  return /^https?:\/\//.test(target) ? target : `http://${target}`;
}

/** A gRPC transport to `target` (`localhost:50051`, `https://adk.example.com`). */
export function grpcTransport(target: string): Transport {
  return createGrpcTransport({ baseUrl: baseUrl(target) });
}

/**
 * A client of adk-server at `target`, or of separate servers:
 * `connect('sessions:50051', {artifacts: 'artifacts:50052', runner: 'runner:50053'})`.
 */
export function connect(
  target = 'localhost:50051',
  options: AdkClientOptions & { artifacts?: string; memory?: string; runner?: string } = {},
): AdkClient {
  const sessions = grpcTransport(target);
  return new AdkClient(
    {
      sessions,
      artifacts: options.artifacts ? grpcTransport(options.artifacts) : sessions,
      memory: options.memory ? grpcTransport(options.memory) : sessions,
      runner: options.runner ? grpcTransport(options.runner) : sessions,
    },
    options,
  );
}

/** Uploads a file (streamed: never all in memory); resolves to the version saved. */
export async function uploadFile(
  adk: AdkClient,
  app: string,
  user: string,
  sessionId: string,
  fileName: string,
  path: string,
  options: Omit<ArtifactSource, 'data'> & CallOpts = {},
): Promise<bigint> {
  const { signal, timeoutMs, headers, ...source } = options;
  const chunks = createReadStream(path, { highWaterMark: 256 * 1024 }) as AsyncIterable<Uint8Array>;
  return adk.saveArtifact(app, user, sessionId, fileName, { ...source, data: chunks }, { signal, timeoutMs, headers });
}

/** Downloads an artifact into a file (streamed); resolves to its metadata. */
export async function downloadFile(
  adk: AdkClient,
  app: string,
  user: string,
  sessionId: string,
  fileName: string,
  path: string,
  options: CallOpts & { version?: Int64 } = {},
): Promise<ArtifactMetadataView> {
  const { metadata, chunks } = await adk.downloadArtifact(app, user, sessionId, fileName, options);
  await pipeline(Readable.from(chunks), createWriteStream(path));
  return metadata;
}
