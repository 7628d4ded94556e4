import type { FlowProducer, Queue } from 'bullmq';
import type { z } from 'zod';

/**
 * What a queue module takes of the process's queues: its own queue, typed by its payload schema, or the flow
 * producer. Each module names only this, never the `Queues` class of ./index.ts, which imports every module for its
 * payload map: so the modules and the map do not import each other. `Queues` has every such shape.
 */
export interface QueueOf<N extends string, S extends z.ZodType> {
  get(name: N): Queue<z.infer<S>>;
}

export interface FlowsOf {
  flow(): FlowProducer;
}
