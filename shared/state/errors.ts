/** The lease named in a fenced write is no longer held by this holder at this term: stop acting as leader. */
export class LeaseLostError extends Error {
  readonly lease: string;
  readonly term: number;
  constructor(lease: string, term: number) {
    super(`lease ${lease} at term ${term} is no longer held; the write was rejected`);
    this.name = 'LeaseLostError';
    this.lease = lease;
    this.term = term;
  }
}

/** A compare-and-set found a different version than expected: re-read and decide again. */
export class VersionConflictError extends Error {
  readonly record: string;
  readonly expected: number | 'absent' | 'any';
  constructor(record: string, expected: number | 'absent' | 'any') {
    super(`record ${record} is not at version ${expected}; it was changed concurrently`);
    this.name = 'VersionConflictError';
    this.record = record;
    this.expected = expected;
  }
}
