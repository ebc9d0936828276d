// Prints the slowest test files (what a run's time goes to: docs/contributing/test-beds.md#cost), then the run's
// totals as one plain line ("N passed, N failed, N skipped") after jest's own summary, so that CI reads the result
// the same way whatever runner produced it.
const SLOWEST = 12;

export default class SummaryReporter {
  onRunComplete(_contexts, results) {
    const files = results.testResults
      .map((r) => ({ file: r.testFilePath.slice(r.testFilePath.indexOf('/test/') + 1), ms: r.perfStats.end - r.perfStats.start }))
      .sort((a, b) => b.ms - a.ms);
    if (files.length > 1) {
      process.stdout.write(`\nslowest files (wall time, s):\n`);
      for (const { file, ms } of files.slice(0, SLOWEST)) process.stdout.write(`${(ms / 1000).toFixed(1).padStart(7)}  ${file}\n`);
    }
    const skipped = results.numPendingTests + results.numTodoTests;
    process.stdout.write(`\n${results.numPassedTests} passed, ${results.numFailedTests} failed, ${skipped} skipped\n`);
  }
}
