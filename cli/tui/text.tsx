import { Text as InkText, type TextProps } from 'ink'
import { Children, type ReactNode } from 'react'
import { safeText } from '../safe-text.js'

// Every word the ink screens draw goes through this Text (issue 41): ink writes a string as it is,
// so a gate's summary or a member's reply holding ESC[2J or OSC 52 would act on the reviewer's
// terminal. Strings among its children are shown with their control characters escaped; line breaks
// stay (ink lays them out), and a tab becomes two spaces, since ink counts a tab as no width and the
// terminal then moves past what ink drew. The screens import Text from here, never from ink
// (test/cli/tui/hostile-text.test.tsx holds them to it).

/** Text as the screens show it: escaped, line breaks kept, a tab two spaces. */
export function screenText(text: string): string {
  return safeText(text, { multiline: true }).replace(/\t/g, '  ')
}

export function Text(props: TextProps): ReactNode {
  const { children, ...rest } = props
  return (
    <InkText {...rest}>
      {Children.map(children, (child) => (typeof child === 'string' ? screenText(child) : child))}
    </InkText>
  )
}
