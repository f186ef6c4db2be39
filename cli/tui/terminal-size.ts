import { useStdout } from 'ink'
import { useEffect, useState } from 'react'

// The size the screens (gate review, chat) lay themselves out in.

function sizeOf(stdout: NodeJS.WriteStream): { width: number; height: number } {
  return { width: stdout.columns || 80, height: stdout.rows || 0 }
}

/**
 * The terminal's size, read again when it is resized. Heard before ink hears it (ink draws again at
 * once on a resize): the screen then draws at the new size straight away, never once more at the old
 * width, whose lines the narrower terminal would wrap past ink's count of them (issue 51).
 */
export function useTerminalSize(): { width: number; height: number } {
  const { stdout } = useStdout()
  const [size, setSize] = useState(() => sizeOf(stdout))
  useEffect(() => {
    const resized = () => setSize(sizeOf(stdout))
    stdout.prependListener('resize', resized)
    return () => void stdout.off('resize', resized)
  }, [stdout])
  return size
}
