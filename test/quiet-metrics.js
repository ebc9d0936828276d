// Tests write no EMF metric documents to stdout (thousands of lines in a run); the tests of the metrics
// themselves turn them on (POWERTOOLS_METRICS_DISABLED=false) around what they check.
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
