import pino from 'pino'

export type Logger = pino.Logger

/** JSON lines on stdout (DESIGN 1); secrets never reach a log line (DESIGN 3). */
export function createLogger(level = 'info', destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: ['authorization', '*.authorization', 'token', '*.token', 'secret', '*.secret', 'apiKey', '*.apiKey'],
        censor: '[redacted]',
      },
    },
    destination ?? pino.destination({ sync: false }),
  )
}
