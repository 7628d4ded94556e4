import { z } from 'zod';

/**
 * Where a workspace's exports go (and where bulk imports may be read from). Declared in the workspace file,
 * stored in workspaces.export_destination; credentials never leave the store (not logged, not returned).
 */
export const S3Destination = z
  .object({
    provider: z.literal('s3'),
    bucket: z.string().min(1),
    region: z.string().default('us-east-1'),
    /** For S3-compatible stores (s3rver, MinIO, R2...): their base address; path-style addressing is used. */
    endpoint: z.url().optional(),
    credentials: z
      .object({
        accessKeyId: z.string().min(1),
        secretAccessKey: z.string().min(1),
        sessionToken: z.string().optional(),
      })
      .optional(),
    /** Optional key prefix before `segment-export/...`. */
    prefix: z.string().default(''),
  })
  .strict();

export const GcsDestination = z
  .object({
    provider: z.literal('gcs'),
    bucket: z.string().min(1),
    projectId: z.string().min(1),
    /** For emulators: the API base address. */
    endpoint: z.url().optional(),
    /** A service-account key (the JSON file's content); without it, the ambient credentials are used. */
    credentials: z.object({ client_email: z.string(), private_key: z.string() }).passthrough().optional(),
    prefix: z.string().default(''),
  })
  .strict();

export const Destination = z.discriminatedUnion('provider', [S3Destination, GcsDestination]);
export type Destination = z.infer<typeof Destination>;
