// Prints the run's totals as one plain line ("N passed, N failed, N skipped") after jest's own summary, so
// that CI reads the result the same way whatever runner produced it.
export default class SummaryReporter {
  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    process.stdout.write(`\n${results.numPassedTests} passed, ${results.numFailedTests} failed, ${skipped} skipped\n`);
  }
}
