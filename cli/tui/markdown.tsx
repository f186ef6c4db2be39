import { Box } from 'ink'
import { Lexer, type Token, type Tokens } from 'marked'
import type { ReactNode } from 'react'
import { safeText } from '../safe-text.js'
import { screenText, Text } from './text.js'

// A member's reply is markdown; the chat screen draws it as a terminal shows text: headings and
// emphasis as styles, lists with their marks, quotes with a bar, code in a box with its language,
// links as their text and address. marked's lexer reads the markdown (GFM); this file only draws its
// tokens, so a reply still being written (an unclosed fence, half a list) draws as far as it goes.
// A reply is a model's text: its control characters are escaped before it is read (issue 41), and
// again in what an entity (&#27;) stands for, so widths are counted on what is shown.

const entities: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
}

/**
 * HTML entities as the characters they stand for (the lexer leaves them as written); one that stands
 * for a control character shows its escape, as the character itself would.
 */
export function decodeEntities(text: string): string {
  const decoded = text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, name: string) => {
    if (name[0] === '#') {
      const code =
        name[1] === 'x' || name[1] === 'X' ? parseInt(name.slice(2), 16) : Number(name.slice(1))
      return Number.isFinite(code) && code > 0 && code <= 0x10ffff
        ? String.fromCodePoint(code)
        : whole
    }
    return entities[name.toLowerCase()] ?? whole
  })
  return screenText(decoded)
}

/**
 * The markdown's tokens (GFM), read from the text with its control characters escaped (line breaks
 * and tabs kept: they are markdown). Never throws: marked reads any text as some markdown.
 */
export function lex(text: string): Token[] {
  return new Lexer({ gfm: true }).lex(safeText(text, { multiline: true }))
}

/** Inline tokens as plain text (for a table's widths and a link's own words). */
export function plainText(tokens: readonly Token[] | undefined): string {
  return (tokens ?? [])
    .map((t) => {
      if (t.type === 'br') return '\n'
      if ('tokens' in t && Array.isArray(t.tokens) && t.tokens.length) return plainText(t.tokens)
      return 'text' in t && typeof t.text === 'string' ? decodeEntities(t.text) : ''
    })
    .join('')
}

function Inline(props: { tokens: readonly Token[] | undefined }): ReactNode {
  return (props.tokens ?? []).map((token, i) => <InlineToken key={i} token={token} />)
}

function InlineToken({ token }: { token: Token }): ReactNode {
  switch (token.type) {
    case 'strong':
      return (
        <Text bold>
          <Inline tokens={token.tokens} />
        </Text>
      )
    case 'em':
      return (
        <Text italic>
          <Inline tokens={token.tokens} />
        </Text>
      )
    case 'del':
      return (
        <Text strikethrough>
          <Inline tokens={token.tokens} />
        </Text>
      )
    case 'codespan':
      return <Text color="yellow">{decodeEntities(token.text)}</Text>
    case 'br':
      return '\n'
    case 'link': {
      const link = token as Tokens.Link
      const words = plainText(link.tokens)
      const href = link.href.replace(/^mailto:/, '')
      if (!words || words === link.href || words === href) return <Text color="blue">{href}</Text>
      return (
        <Text>
          <Text color="blue">
            <Inline tokens={link.tokens} />
          </Text>
          <Text dimColor> ({link.href})</Text>
        </Text>
      )
    }
    case 'image': {
      const image = token as Tokens.Image
      return <Text dimColor>{`[image${image.text ? `: ${image.text}` : ''}] (${image.href})`}</Text>
    }
    case 'checkbox':
      return (token as Tokens.Checkbox).checked ? '☑ ' : '☐ '
    default:
      if ('tokens' in token && Array.isArray(token.tokens) && token.tokens.length)
        return <Inline tokens={token.tokens} />
      return 'text' in token && typeof token.text === 'string' ? decodeEntities(token.text) : ''
  }
}

const bullets = ['•', '◦', '▪']

function List(props: { list: Tokens.List; width: number; depth: number }): ReactNode {
  const { list, depth } = props
  const start = typeof list.start === 'number' ? list.start : 1
  const marks = list.items.map((_, i) =>
    list.ordered ? `${start + i}.` : bullets[depth % bullets.length]!,
  )
  const markWidth = Math.max(...marks.map((m) => m.length)) + 1
  return (
    <Box flexDirection="column">
      {list.items.map((item, i) => (
        <Box key={i} flexDirection="row" marginTop={i > 0 && list.loose ? 1 : 0}>
          <Box width={markWidth} flexShrink={0}>
            <Text dimColor={!list.ordered}>{marks[i]}</Text>
          </Box>
          <Box flexDirection="column" flexGrow={1} flexShrink={1}>
            <Blocks
              tokens={item.tokens}
              width={props.width - markWidth}
              depth={depth + 1}
              tight={!item.loose}
            />
          </Box>
        </Box>
      ))}
    </Box>
  )
}

function CodeBlock(props: { code: Tokens.Code }): ReactNode {
  const lang = props.code.lang?.trim().split(/\s+/)[0]
  return (
    <Box flexDirection="column" borderStyle="round" borderColor="gray" paddingX={1}>
      {lang && <Text dimColor>{lang}</Text>}
      <Text>{props.code.text.replace(/\t/g, '  ')}</Text>
    </Box>
  )
}

function Table(props: { table: Tokens.Table; width: number }): ReactNode {
  const { table } = props
  const cells = [table.header, ...table.rows].map((row) => row.map((c) => plainText(c.tokens)))
  const columns = table.header.length
  let widths = Array.from({ length: columns }, (_, c) =>
    Math.max(3, ...cells.map((row) => (row[c] ?? '').length)),
  )
  const room = props.width - 3 * (columns - 1)
  const total = widths.reduce((a, b) => a + b, 0)
  if (total > room) widths = widths.map((w) => Math.max(3, Math.floor((w / total) * room)))
  const row = (values: string[], header: boolean, key: number) => (
    <Box key={key} flexDirection="row">
      {values.map((value, c) => (
        <Box key={c} width={widths[c]! + (c < columns - 1 ? 3 : 0)} flexShrink={0}>
          <Text bold={header} wrap="truncate-end">
            {value}
          </Text>
        </Box>
      ))}
    </Box>
  )
  return (
    <Box flexDirection="column">
      {row(cells[0]!, true, 0)}
      <Text dimColor>{widths.map((w) => '─'.repeat(w)).join('   ')}</Text>
      {cells.slice(1).map((values, i) => row(values, false, i + 1))}
    </Box>
  )
}

function Block(props: { token: Token; width: number; depth: number }): ReactNode {
  const { token, width, depth } = props
  switch (token.type) {
    case 'heading': {
      const heading = token as Tokens.Heading
      return (
        <Text bold color={heading.depth <= 2 ? 'cyan' : undefined} underline={heading.depth === 1}>
          <Inline tokens={heading.tokens} />
        </Text>
      )
    }
    case 'paragraph':
      return (
        <Text>
          <Inline tokens={token.tokens} />
        </Text>
      )
    case 'text':
      return (
        <Text>
          {token.tokens?.length ? <Inline tokens={token.tokens} /> : decodeEntities(token.text)}
        </Text>
      )
    case 'code':
      return <CodeBlock code={token as Tokens.Code} />
    case 'blockquote':
      return (
        <Box
          borderStyle="bold"
          borderTop={false}
          borderRight={false}
          borderBottom={false}
          borderColor="gray"
          paddingLeft={1}
          flexDirection="column"
        >
          <Blocks tokens={token.tokens ?? []} width={width - 2} depth={depth} />
        </Box>
      )
    case 'list':
      return <List list={token as Tokens.List} width={width} depth={depth} />
    case 'hr':
      return <Text dimColor>{'─'.repeat(Math.max(3, Math.min(width, 80)))}</Text>
    case 'table':
      return <Table table={token as Tokens.Table} width={width} />
    case 'html':
      return <Text dimColor>{token.text.replace(/\n$/, '')}</Text>
    default:
      return 'text' in token && typeof token.text === 'string' ? <Text>{token.text}</Text> : null
  }
}

/** Blocks one under the other, a blank line between them (none in a tight list item). */
function Blocks(props: {
  tokens: readonly Token[]
  width: number
  depth: number
  tight?: boolean
}): ReactNode {
  const blocks = props.tokens.filter(
    (t) => t.type !== 'space' && t.type !== 'def' && t.type !== 'checkbox',
  )
  const checkbox = props.tokens.find((t) => t.type === 'checkbox') as Tokens.Checkbox | undefined
  return blocks.map((token, i) => (
    <Box key={i} marginTop={i > 0 && !props.tight ? 1 : 0} flexDirection="column">
      {i === 0 && checkbox ? (
        <Text>
          {checkbox.checked ? '☑ ' : '☐ '}
          {'tokens' in token && token.tokens?.length ? (
            <Inline tokens={token.tokens} />
          ) : (
            plainText([token])
          )}
        </Text>
      ) : (
        <Block token={token} width={props.width} depth={props.depth} />
      )}
    </Box>
  ))
}

/** Markdown drawn for a terminal `width` columns wide. */
export function Markdown(props: { text: string; width: number }): ReactNode {
  return (
    <Box flexDirection="column" width={props.width}>
      <Blocks tokens={lex(props.text)} width={props.width} depth={0} />
    </Box>
  )
}

/**
 * Rows the markdown takes at `width`, a little more rather than less: what the screen keeps in
 * view of a reply being written is cut to fit the terminal by this.
 */
export function markdownRows(text: string, width: number): number {
  const room = Math.max(8, width - 6)
  const rowsOf = (line: string) => Math.max(1, Math.ceil(line.length / room))
  let rows = 0
  for (const token of lex(text)) {
    if (token.type === 'space') continue
    if (rows > 0) rows += 1
    if (token.type === 'code') rows += 3
    rows += token.raw
      .replace(/\n+$/, '')
      .split('\n')
      .reduce((sum, line) => sum + rowsOf(line), 0)
    if (token.type === 'table') rows += 1
  }
  return rows
}
