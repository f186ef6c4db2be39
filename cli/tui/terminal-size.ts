import { useStdout } from 'ink'
import { useEffect, useState } from 'react'

// The size the screens (gate review, chat) lay themselves out in.

function sizeOf(stdout: NodeJS.WriteStream): { width: number; height: number } {
  return { width: stdout.columns || 80, height: stdout.rows || 0 }
}

/** The terminal's size, read again when it is resized (ink lays the boxes out again by itself). */
export function useTerminalSize(): { width: number; height: number } {
  const { stdout } = useStdout()
  const [size, setSize] = useState(() => sizeOf(stdout))
  useEffect(() => {
    const resized = () => setSize(sizeOf(stdout))
    stdout.on('resize', resized)
    return () => void stdout.off('resize', resized)
  }, [stdout])
  return size
}
