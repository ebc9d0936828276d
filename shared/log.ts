// The one structured log shape the code writes through: in a function, the Powertools logger
// (`(level, m, f) => logger[level](m, f ?? {})`); locally, the runtime's line printer. Modules take a `Log`
// rather than a logger, so the functional core stays free of any logging library.
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export type Log = (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;
