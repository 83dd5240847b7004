/** nginx for tests and benchmarks: foreground, one worker, unprivileged, every path under one temp dir. */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ROOT } from './processes.js'

/** The ```nginx block of docs/integrations.md (the page operators copy it from) between `<!-- <marker>:begin -->` and `<!-- <marker>:end -->`, or undefined. */
export function docsNginxBlock(marker: string): string | undefined {
  const page = readFileSync(join(ROOT, 'docs', 'integrations.md'), 'utf8')
  return new RegExp(`<!-- ${marker}:begin -->\\s*\`\`\`nginx\\n([\\s\\S]*?)\`\`\`\\s*<!-- ${marker}:end -->`).exec(page)?.[1]
}

/** A whole nginx.conf around `httpBody` (the inside of `http {}`), with pid, logs and temp paths under `dir`. */
export function nginxConf(dir: string, httpBody: string, workerConnections = 256): string {
  return `daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections ${workerConnections}; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${httpBody}
}
`
}
