// Which tools a version's `tools` entries reach (spec: Task definition, tools; Definition checks;
// DESIGN 15). One rule, read by the definition checks (the gate rules) and by a run (the tools it is
// given, the connections it opens): a check can then never pass a tool that the run would hand to the
// model. It once was two, and a task listing "os" passed the checks while its run reached os.mail_send.

/** The namespace of a tool or of a `tools` entry: what comes before its first dot (os, vcs, ...). */
export function toolNamespace(name: string): string {
  const dot = name.indexOf('.')
  return dot === -1 ? name : name.slice(0, dot)
}

/**
 * Whether `tools` reaches `tool`: by its name, or by its namespace as `ns` or `ns.*`; the built-in
 * tools as a connection's (`os` reaches os.mail_send as `vcs` reaches vcs.merge_pull_request).
 */
export function reaches(tools: readonly string[], tool: string): boolean {
  const namespace = toolNamespace(tool)
  return tools.some((t) => t === tool || t === namespace || t === `${namespace}.*`)
}

/** Whether `tools` reaches any tool of a namespace (a connection's): by it, by `ns.*`, or by a tool's name. */
export function reachesNamespace(tools: readonly string[], namespace: string): boolean {
  return tools.some((t) => toolNamespace(t) === namespace)
}
