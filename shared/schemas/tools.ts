import { z } from 'zod'
import { IsoTime, Uuid } from './common.js'
import { toolLayers } from '../values.js'
export { toolLayers }

// Tool connections (spec: Endpoints Tools; Authentication 10; DESIGN 6).

export const ToolLayer = z.enum(toolLayers)
export type ToolLayer = z.infer<typeof ToolLayer>

/** A tool namespace: a run calls the connection's tools as <name>.<tool>. */
const ToolNamespace = z
  .string()
  .regex(
    /^[a-z][a-z0-9_-]{0,39}$/,
    'a tool namespace: lower-case letters, digits, _ or -, starting with a letter',
  )

export const ToolConnection = z
  .object({
    id: Uuid,
    name: z.string(),
    kind: z.enum(['mcp', 'browser']),
    url: z.string().nullable(),
    /** Whether a token is kept for the tool server; the token itself is never answered. */
    hasToken: z.boolean(),
    sites: z.array(z.string()).nullable(),
    startPage: z.string().nullable(),
    layer: ToolLayer,
    layerId: Uuid.nullable(),
    /** Tools a task must gate by name (the version-control connection starts with its merge tool). */
    mustGate: z.array(z.string()),
    description: z.string(),
    createdAt: IsoTime,
    updatedAt: IsoTime,
  })
  .meta({ id: 'ToolConnection' })
export type ToolConnection = z.infer<typeof ToolConnection>

export const ToolConnectionCreate = z
  .object({
    name: ToolNamespace,
    /** An MCP tool server over Streamable HTTP ... */
    url: z.url().optional(),
    token: z.string().min(1).max(4000).optional(),
    /** ... or a browser-operated system. */
    sites: z.array(z.string().min(1)).max(50).optional(),
    startPage: z.string().optional(),
    layer: ToolLayer,
    layerId: Uuid.optional(),
    mustGate: z
      .array(z.string().min(1))
      .optional()
      .meta({ description: 'only the chief executive may set it' }),
    description: z.string().max(2000).optional(),
  })
  .meta({ id: 'ToolConnectionCreate' })
export type ToolConnectionCreate = z.infer<typeof ToolConnectionCreate>

/** A change: null clears a field, so a connection can drop its token or turn from server to browser. */
export const ToolConnectionPatch = ToolConnectionCreate.partial()
  .extend({
    url: z.url().nullable().optional(),
    token: z.string().min(1).max(4000).nullable().optional(),
    sites: z.array(z.string().min(1)).max(50).nullable().optional(),
    startPage: z.string().nullable().optional(),
  })
  .meta({ id: 'ToolConnectionPatch' })
export type ToolConnectionPatch = z.infer<typeof ToolConnectionPatch>

/** GET /v1/tools/bindings: the connections of a layer (named by its id). */
export const ToolConnectionQuery = z.object({
  layer: ToolLayer.optional(),
  layerId: Uuid.optional(),
})
export type ToolConnectionQuery = z.infer<typeof ToolConnectionQuery>

export const SignIn = z
  .object({ memberId: Uuid, site: z.string(), savedAt: IsoTime })
  .meta({ id: 'BrowserSignIn' })

export const ToolOAuthStart = z
  .object({
    connectionId: Uuid,
    authorizeUrl: z.url(),
    clientId: z.string().min(1),
    scope: z.string().optional(),
  })
  .meta({ id: 'ToolOAuthStart' })
