import { stripVTControlCharacters, styleText } from 'node:util';
import { Logger, LogFormatter, LogItem, LogLevelThreshold } from '@aws-lambda-powertools/logger';
import type { LogAttributes, UnformattedAttributes } from '@aws-lambda-powertools/logger/types';

/**
 * How function loggers print: Lambda's JSON (unset, as in AWS) or, where the local runtime asks for it
 * (`outrigger run`, docs/operations/operating.md#reading-the-local-log), one short line per action.
 */
export const LOG_FORMAT_ENV = 'OUTRIGGER_LOG_FORMAT';
export const LOG_FORMATS = ['text', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** One structured logger per function; the level comes from POWERTOOLS_LOG_LEVEL (default INFO). */
export function functionLogger(functionName: string, env: NodeJS.ProcessEnv = process.env): Logger {
  const options = { serviceName: 'outrigger', persistentKeys: { function: functionName } };
  if (env[LOG_FORMAT_ENV] !== 'text') return new Logger(options);
  return new LineLogger({ ...options, logFormatter: new LineLogFormatter({ color: process.stdout.isTTY && !env.NO_COLOR }) });
}

/** The fields that name what an action was about, in the order the handlers log them. */
const OBJECT_FIELDS = ['parent', 'migration', 'policy', 'object', 'reporter', 'name'] as const;
/** The fields that say how it ended. */
const OUTCOME_FIELDS = ['outcome', 'action', 'error', 'problem', 'reason'] as const;
const MAX_OUTCOME = 120;
/** Keys Powertools adds to every line in Lambda (the context), not worth a terminal's width. */
const CONTEXT_FIELDS = new Set([
  'function',
  'cluster',
  'key',
  'lambda_request_id',
  'function_name',
  'function_arn',
  'function_memory_size',
  'function_request_id',
  'cold_start',
  'sampling_rate',
  'xray_trace_id',
]);

/**
 * One line: local time, function, cluster, the object and the outcome (an outcome field, or else the non-zero
 * counts), coloured for a terminal by level. '-' stands for what the entry does not name.
 */
export function humanLine(
  base: Pick<UnformattedAttributes, 'timestamp' | 'logLevel' | 'message'>,
  fields: LogAttributes,
  opts: { color: boolean },
): string {
  const paint = (format: Parameters<typeof styleText>[0], text: string) =>
    opts.color ? styleText(format, text, { validateStream: false }) : text;
  const key = typeof fields.key === 'object' && fields.key !== null ? (fields.key as Record<string, unknown>) : undefined;
  const cluster = text(fields.cluster ?? key?.cluster) || '-';
  const named = OBJECT_FIELDS.map((f) => text(fields[f])).find(Boolean);
  const object =
    named ?? (key ? [key.kind, [key.namespace, key.name].filter(Boolean).join('/')].filter(Boolean).map(String).join(' ') : '') ?? '';
  const outcomeField = OUTCOME_FIELDS.map((f) => text(fields[f])).find(Boolean);
  const counts = Object.entries(fields)
    .filter(([k, v]) => typeof v === 'number' && v !== 0 && !CONTEXT_FIELDS.has(k))
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(' ');
  const outcome = oneLine(outcomeField ?? counts);
  const level = base.logLevel.toUpperCase();
  const tone = level === 'ERROR' || level === 'CRITICAL' ? 'red' : level === 'WARN' ? 'yellow' : 'green';
  return [
    paint('dim', base.timestamp.toTimeString().slice(0, 8)),
    paint('cyan', text(fields.function) || '-'),
    paint('magenta', cluster),
    paint('bold', object || '-'),
    `${base.message}${outcome ? `: ${paint(tone, outcome)}` : ''}`,
  ].join(' ');
}

function text(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (value instanceof Error) return value.message;
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

function oneLine(s: string): string {
  const flat = stripVTControlCharacters(s).replace(/\s+/g, ' ').trim();
  return flat.length > MAX_OUTCOME ? `${flat.slice(0, MAX_OUTCOME - 1)}…` : flat;
}

/** Powertools' custom log formatter: the entry becomes the one line, which LineLogger prints as it is. */
export class LineLogFormatter extends LogFormatter {
  private readonly color: boolean;

  constructor(opts: { color: boolean }) {
    super();
    this.color = opts.color;
  }

  override formatAttributes(attributes: UnformattedAttributes, additional: LogAttributes): LogItem {
    return new LogItem({ attributes: { line: humanLine(attributes, additional, { color: this.color }) } });
  }
}

/**
 * Powertools' Logger, printing the formatter's line instead of its JSON encoding (Logger.printLog always
 * JSON-encodes the formatter's item): warnings and errors to stderr, as Powertools' console does.
 */
class LineLogger extends Logger {
  protected override printLog(logLevel: number, log: LogItem): void {
    (logLevel >= LogLevelThreshold.WARN ? process.stderr : process.stdout).write(`${String(log.getAttributes().line)}\n`);
  }
}
