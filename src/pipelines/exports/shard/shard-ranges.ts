/** How an export is cut into shards: ranges of random_bucket (0-9,999), each one job of the export's flow. */

/** random_bucket ranges [from, to) of an export's shards. */
export function shardRanges(bucketsPerShard: number): Array<[number, number]> {
  const step = bucketsPerShard > 0 ? Math.min(bucketsPerShard, 10_000) : 10_000;
  const out: Array<[number, number]> = [];
  for (let from = 0; from < 10_000; from += step) out.push([from, Math.min(10_000, from + step)]);
  return out;
}

/** What cutting an export into shards needs to know of it (columns of `exports`). */
export interface ExportShardingRow {
  /** random_bucket values per shard when it was requested; null for exports recorded before it was kept. */
  shard_buckets: number | null;
  shard_count: number;
}

/** The shards an export was cut into, as recorded (exports from before the record get even ranges), or only `only`. */
export function exportShards(
  row: ExportShardingRow,
  only?: Set<number>,
): Array<{ shard: number; bucketFrom: number; bucketTo: number }> {
  return shardRanges(row.shard_buckets ?? Math.ceil(10_000 / Math.max(1, row.shard_count)))
    .map(([bucketFrom, bucketTo], shard) => ({ shard, bucketFrom, bucketTo }))
    .filter(({ shard }) => !only || only.has(shard));
}
