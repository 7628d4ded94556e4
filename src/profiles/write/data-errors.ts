/**
 * How the profile write tells a row PostgreSQL refuses for its data (the same rows fail on every attempt: set aside, a
 * dead letter or a rejects line) from a fault of the moment (roll back, apply again later). Ingestion's dead letters,
 * imports' rejects files and CDI's rejects all classify through here.
 */

/** Why an object was refused: the SQLSTATE (or 'payload') and PostgreSQL's message, which may quote the data. */
export interface DataError {
  code: string;
  message: string;
}

const MAX_MESSAGE = 1000;
export const capped = (message: string) =>
  message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}...` : message;

/**
 * The refusal, when an error is about the data a statement carried (so that the same rows fail again on every
 * attempt): class 22, data exception (22P05 untranslatable character, 22021 invalid byte sequence, 22P02 invalid
 * text representation, 22003 numeric value out of range, 22007 and 22008 dates...), class 23, integrity constraint
 * violation, and 54000/54001, a value too large or nested too deep. Null for everything else: a lost connection,
 * a deadlock or serialization failure (class 40), a lock or statement timeout, a full disk, a bug in our code. Those
 * roll the batch back whole, to be applied again later.
 */
export function dataErrorOf(err: unknown): DataError | null {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^(?:2[23][0-9A-Z]{3}|5400[01])$/.test(code)) return null;
  return { code, message: capped(String((err as Error).message)) };
}

const REASONS: Record<string, string> = {
  payload: 'not a staged payload (not JSON, or not {events, purchases, attributes})',
  '22P05': 'untranslatable character',
  '22021': 'invalid byte sequence',
  '22P02': 'invalid text representation',
  '22003': 'numeric value out of range',
  '22007': 'invalid datetime format',
  '22008': 'datetime field overflow',
  '54000': 'program limit exceeded',
  '54001': 'statement too complex',
};

/**
 * A reason fit for a log line: PostgreSQL's messages (and JSON.parse's) may quote the data, which is personal, so
 * logs carry the code's name and the table keeps the message.
 */
export function reasonOf(code: string): string {
  return REASONS[code] ?? (code.startsWith('23') ? 'integrity constraint violation' : 'data exception');
}
