/**
 * PostgreSQL's binary COPY format (its documentation's "Binary Format" of COPY): the signature a stream opens with,
 * and the whole header this service writes and reads (signature, flags 0, no header extension).
 */
export const COPY_BINARY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
export const COPY_BINARY_HEADER = Buffer.concat([COPY_BINARY_SIGNATURE, Buffer.alloc(8)]);
