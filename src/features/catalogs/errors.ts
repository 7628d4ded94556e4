import { AppError, type CatalogErrorEntry } from '../../platform/errors.js';

/** The spec's catalog error ids, plus `invalid-request` for a malformed paging cursor. */
export type CatalogErrorId =
  | 'catalog-not-found'
  | 'invalid-ids'
  | 'invalid-fields'
  | 'invalid-keys-in-value-object'
  | 'too-deep-nesting-in-value-object'
  | 'unable-to-coerce-value'
  | 'item-array-invalid'
  | 'request-includes-too-many-items'
  | 'ids-not-string'
  | 'ids-not-unique'
  | 'ids-too-large'
  | 'items-missing-ids'
  | 'items-too-large'
  | 'id-in-body'
  | 'item-already-exists'
  | 'filtered-set-field-too-long'
  | 'arbitrary-error'
  | 'item-not-found'
  // Catalog management (POST /catalogs).
  | 'catalog-array-invalid'
  | 'too-many-catalog-atoms'
  | 'invalid-catalog-name'
  | 'catalog-name-too-large'
  | 'catalog-name-already-exists'
  | 'description-too-long'
  | 'id-not-first-column'
  | 'too-many-fields'
  | 'invalid-field-names'
  | 'invalid-field-types'
  | 'field-names-too-large'
  | 'field-names-not-unique'
  // Fields.
  | 'request-includes-too-many-fields'
  | 'catalog-exceeds-fields-limit'
  | 'invalid-field-name'
  | 'field-referenced-by-selection'
  // Selections.
  | 'invalid-selection'
  | 'too-many-filters'
  | 'selection-name-already-exists'
  | 'selection-has-invalid-filter'
  | 'selection-invalid-results-limit'
  | 'invalid-sorting'
  | 'invalid-sort-field'
  | 'invalid-sort-order'
  | 'selection-contains-too-many-arrays'
  // Ours, where the public API names no id (docs/catalogs.md).
  | 'invalid-request';

/** The ids that make a refusal a 404: what the path names does not exist. */
const NOT_FOUND_IDS: CatalogErrorId[] = ['catalog-not-found', 'item-not-found'];

/** A refused request lists at most this many entries; the rest are dropped (in request order). */
export const MAX_ERROR_ENTRIES = 500;

/** How an entry names the item it is about: by its id when that is a usable string, else by its position. */
export type ItemLocator = { id: string } | { index: number };

/** Collects every error of one request, in the order found, and turns them into one AppError. */
export class CatalogErrors {
  readonly entries: CatalogErrorEntry[] = [];

  add(id: CatalogErrorId, message: string, parameters: string[] = [], parameterValues: unknown[] = []): void {
    if (this.entries.length >= MAX_ERROR_ENTRIES) return;
    this.entries.push({ id, message, parameters, parameter_values: parameterValues });
  }

  /** An entry about one item: its locator first, then any details. */
  addForItem(id: CatalogErrorId, message: string, at: ItemLocator, details: Record<string, unknown> = {}): void {
    const [name, value] = 'id' in at ? ['id', at.id] : ['index', at.index];
    this.add(id, message, [name, ...Object.keys(details)], [value, ...Object.values(details)]);
  }

  has(id: CatalogErrorId): boolean {
    return this.entries.some((e) => e.id === id);
  }

  get empty(): boolean {
    return this.entries.length === 0;
  }

  /** 404 when the catalog (or item, field, selection) is unknown, 400 for everything else. */
  toAppError(): AppError {
    const missing = NOT_FOUND_IDS.some((id) => this.has(id));
    return new AppError(missing ? 'not_found' : 'bad_request', 'Invalid Request', { catalogErrors: this.entries });
  }

  throwIfAny(): void {
    if (!this.empty) throw this.toAppError();
  }
}

/** Throws a request-refusing error of a single id. */
export function catalogError(
  id: CatalogErrorId,
  message: string,
  parameters: string[] = [],
  parameterValues: unknown[] = [],
): AppError {
  const errors = new CatalogErrors();
  errors.add(id, message, parameters, parameterValues);
  return errors.toAppError();
}

export const catalogNotFound = (name: string) =>
  catalogError('catalog-not-found', 'Could not find catalog', ['catalog_name'], [name]);
export const itemNotFound = (id: string) => catalogError('item-not-found', 'Could not find item', ['item_id'], [id]);

/**
 * An unexpected failure on a catalog endpoint (500, or 503 when a dependency is away) with the spec's arbitrary-error
 * entry; the cause is logged, never sent.
 */
export function arbitraryError(cause: unknown, code: 'internal' | 'unavailable' = 'internal'): AppError {
  return new AppError(code, 'Invalid Request', {
    cause,
    catalogErrors: [
      {
        id: 'arbitrary-error',
        message: 'An arbitrary error occurred. Please try again or contact support.',
        parameters: [],
        parameter_values: [],
      },
    ],
  });
}

/** A refusal about something the path names that does not exist (an unknown field or selection): a 404. */
export function pathNotFound(id: CatalogErrorId, message: string, parameter: string, value: string): AppError {
  return new AppError('not_found', 'Invalid Request', {
    catalogErrors: [{ id, message, parameters: [parameter], parameter_values: [value] }],
  });
}

/** Our own refusals pass through; anything else is the spec's arbitrary-error (logged with its cause by the handler). */
export async function guarded<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw arbitraryError(err);
  }
}
