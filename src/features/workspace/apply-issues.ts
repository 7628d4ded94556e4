import { WorkspaceFileError } from './parse.js';
import type { ApplyRun } from './apply-specs.js';

/** Ends the apply (its transaction rolls back) when a step found problems in the file, naming every one of them. */
export function failOnIssues(run: Pick<ApplyRun, 'issues'>): void {
  if (run.issues.length > 0) throw new WorkspaceFileError(run.issues);
}
