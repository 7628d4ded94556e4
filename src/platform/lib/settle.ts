/**
 * Waits for every promise, then rejects with the first failure, if any. Unlike Promise.all, nothing is left running
 * unobserved when one fails: the caller may then roll back, release or report knowing all of them have ended.
 */
export async function settleAll<T>(promises: Iterable<Promise<T>>): Promise<T[]> {
  const outcomes = await Promise.allSettled(promises);
  const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
  if (failed) throw failed.reason;
  return outcomes.map((o) => (o as PromiseFulfilledResult<T>).value);
}
