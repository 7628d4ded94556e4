import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';

export interface RunningS3 {
  endpoint: string;
  bucket: string;
  /** The directory s3rver keeps objects in. */
  directory: string;
  /** What a workspace's export_destination holds to write there. */
  destination: {
    provider: 's3';
    bucket: string;
    region: string;
    endpoint: string;
    credentials: { accessKeyId: string; secretAccessKey: string };
  };
  close(): Promise<void>;
}

/** A real S3-protocol server (s3rver) on a free loopback port, with one bucket, for one test file. */
export async function startS3rver(bucket = 'exports'): Promise<RunningS3> {
  const directory = await mkdtemp(path.join(tmpdir(), 'ces-s3rver-'));
  const server = new S3rver({
    port: 0,
    address: '127.0.0.1',
    directory,
    silent: true,
    configureBuckets: [{ name: bucket }],
  });
  const address = (await server.run()) as AddressInfo;
  const endpoint = `http://127.0.0.1:${address.port}`;
  return {
    endpoint,
    bucket,
    directory,
    destination: {
      provider: 's3',
      bucket,
      region: 'us-east-1',
      endpoint,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    },
    async close() {
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
