import { readFileSync, readdirSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import ts from 'typescript'
import { expect, it } from 'vitest'

// Vitest drops, without a word, a hook registered inside another hook or a test: an `afterAll` in a
// `beforeAll` never runs. The helpers' clean-up goes through afterFile (test/helpers/after-file.ts);
// a test's own through onTestFinished. This finds the hooks written where they would be dropped.

const root = resolve(import.meta.dirname, '..')
const hooks = new Set(['beforeAll', 'beforeEach', 'afterAll', 'afterEach'])
const running = new Set([...hooks, 'it', 'test'])

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return testFiles(path)
    return /\.tsx?$/.test(entry.name) ? [path] : []
  })
}

/** `it`, `it.each(...)`, `describe.skip` and the like: the name the call starts with. */
function calleeName(call: ts.CallExpression): string {
  let callee: ts.Expression = call.expression
  while (ts.isPropertyAccessExpression(callee) || ts.isCallExpression(callee))
    callee = ts.isCallExpression(callee) ? callee.expression : callee.expression
  return ts.isIdentifier(callee) ? callee.text : ''
}

it('registers no hook inside another hook or a test, where vitest would drop it', () => {
  const dropped: string[] = []
  for (const file of testFiles(join(root, 'test'))) {
    const source = ts.createSourceFile(
      file,
      readFileSync(file, 'utf8'),
      ts.ScriptTarget.Latest,
      true,
    )
    const visit = (node: ts.Node, inside: string | undefined): void => {
      if (ts.isCallExpression(node)) {
        const name = calleeName(node)
        if (hooks.has(name) && inside) {
          const line = source.getLineAndCharacterOfPosition(node.getStart()).line + 1
          dropped.push(`${relative(root, file)}:${line} ${name} inside ${inside}`)
        }
        if (running.has(name)) {
          ts.forEachChild(node, (child) => visit(child, name))
          return
        }
      }
      ts.forEachChild(node, (child) => visit(child, inside))
    }
    visit(source, undefined)
  }
  expect(dropped).toEqual([])
  // Parses every test file: 8.3-10.1 s under `taskset -c 0 npm test`, a third of the default (issue 40).
}, 45_000)
