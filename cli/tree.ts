/** A node of a tree drawn on a terminal: a label and its children. */
export interface TreeNode {
  label: string
  children?: TreeNode[]
}

/** Each root on a line of its own, its descendants below it on box-drawing branches. */
export function drawTree(roots: TreeNode[]): string[] {
  const lines: string[] = []
  const walk = (nodes: TreeNode[], prefix: string) =>
    nodes.forEach((node, i) => {
      const last = i === nodes.length - 1
      lines.push(`${prefix}${last ? '└── ' : '├── '}${node.label}`)
      walk(node.children ?? [], prefix + (last ? '    ' : '│   '))
    })
  for (const root of roots) {
    lines.push(root.label)
    walk(root.children ?? [], '')
  }
  return lines
}
