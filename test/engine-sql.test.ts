import { readFileSync, readdirSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

// The engine asks the domain (STYLE: The engine asks the domain; docs/architecture.md: one writer per
// table; issue 43): the loops hold no SQL of their own against the tables, every statement they send is
// a named domain function. Every table a migration creates belongs to a folder of server/domain/, so no
// SQL template under server/engine/ may read or write one.

const root = resolve(import.meta.dirname, '..')

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return /\.tsx?$/.test(entry.name) ? [path] : []
  })
}

/** Every table the migrations create. */
function tables(): string[] {
  const dir = join(root, 'migrations')
  const names = readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .flatMap((f) =>
      [
        ...readFileSync(join(dir, f), 'utf8').matchAll(/create table (?:if not exists )?(\w+)/gi),
      ].map((m) => m[1]!.toLowerCase()),
    )
  return [...new Set(names)]
}

/** The text of every tagged template in a file (the SQL of postgres.js), with where it is. */
function templates(file: string): { line: number; text: string }[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest)
  const found: { line: number; text: string }[] = []
  const visit = (node: ts.Node) => {
    if (ts.isTaggedTemplateExpression(node)) {
      const t = node.template
      const text = ts.isNoSubstitutionTemplateLiteral(t)
        ? t.text
        : [t.head.text, ...t.templateSpans.map((s) => s.literal.text)].join(' ? ')
      found.push({
        line: source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1,
        text,
      })
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

describe('the engine', () => {
  it('sends no SQL of its own against a table: it calls the domain', () => {
    const owned = tables()
    expect(owned).toContain('runs')
    const statement = new RegExp(
      `\\b(insert\\s+into|update|delete\\s+from|from|join)\\s+(${owned.join('|')})\\b`,
      'i',
    )
    const offenders = sourceFiles(join(root, 'server', 'engine')).flatMap((file) =>
      templates(file)
        .filter((t) => statement.test(t.text))
        .map((t) => `${relative(root, file)}:${t.line}: ${t.text.trim().split('\n')[0]}`),
    )
    expect(offenders).toEqual([])
  })
})
