import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { RunConnection } from '../../domain/tools/index.js'
import type { Logger } from '../../log.js'
import type { ToolSpec } from '../models/index.js'

// The tools of a run's MCP tool servers, over Streamable HTTP (DESIGN 6), named <connection>.<tool>.

interface Open {
  connection: RunConnection
  client: Client
  tools: Map<string, string>
}

export interface ToolOutcome {
  content: string
  isError: boolean
}

export class McpTools {
  private open: Open[] = []

  constructor(
    private readonly connections: RunConnection[],
    private readonly log: Logger,
  ) {}

  /** Connects to each tool server and lists its tools; a server that does not answer offers none. */
  async connect(): Promise<ToolSpec[]> {
    const specs: ToolSpec[] = []
    for (const connection of this.connections.filter((c) => c.kind === 'mcp' && c.url)) {
      try {
        const client = new Client({ name: 'osd', version: '1' })
        const transport = new StreamableHTTPClientTransport(new URL(connection.url!), {
          requestInit: connection.token
            ? { headers: { Authorization: `Bearer ${connection.token}` } }
            : undefined,
        })
        await client.connect(transport, { timeout: 15_000 })
        const listed = await client.listTools(undefined, { timeout: 15_000 })
        const tools = new Map<string, string>()
        for (const tool of listed.tools) {
          const name = `${connection.name}.${tool.name}`
          tools.set(name, tool.name)
          specs.push({
            name,
            description: tool.description ?? `${tool.name} on ${connection.name}`,
            parameters: (tool.inputSchema as Record<string, unknown>) ?? {
              type: 'object',
              properties: {},
            },
          })
        }
        this.open.push({ connection, client, tools })
      } catch (err) {
        this.log.warn(
          { err: (err as Error).message, connection: connection.name },
          'tool server did not answer; its tools are left out',
        )
      }
    }
    // In one order whatever order the connections were read in (their query orders by layer only) or
    // the servers list them: the tools open every model call's prompt, which must be the same bytes at
    // every call for the provider's cache to match it (DESIGN 13).
    return specs.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  }

  async call(
    name: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<ToolOutcome> {
    const open = this.open.find((o) => o.tools.has(name))
    if (!open) return { content: `No tool ${name} is connected.`, isError: true }
    const result = await open.client.callTool(
      { name: open.tools.get(name)!, arguments: args },
      undefined,
      {
        signal,
        timeout: 120_000,
      },
    )
    const content = ((result.content ?? []) as { type: string; text?: string }[])
      .map((part) => (part.type === 'text' ? part.text : `[${part.type}]`))
      .join('\n')
    return {
      content: content || (result.isError ? 'the tool failed' : 'done'),
      isError: Boolean(result.isError),
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.open.map((o) => o.client.close().catch(() => undefined)))
    this.open = []
  }
}
