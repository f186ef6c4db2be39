// Ids are UUIDs (spec: Common conventions); PostgreSQL refuses anything else as a uuid.

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function isUuid(value: string): boolean {
  return uuid.test(value)
}
