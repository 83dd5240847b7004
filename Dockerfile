# syntax=docker/dockerfile:1
# Build stage: install with dev dependencies; `npm ci` runs the `prepare` script (tsc → dist/).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
COPY src ./src
COPY schemas ./schemas
RUN npm ci --no-audit --no-fund

# Runtime stage: production dependencies only, compiled JS, schema and sample bundles.
FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    FAIRVISOR_HOST=0.0.0.0 \
    FAIRVISOR_PORT=8080
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY schemas ./schemas
COPY policies ./policies
COPY proto ./proto
USER node
EXPOSE 8080
# /livez is on the admin listener when FAIRVISOR_ADMIN_PORT is set (in both modes), else on the main one.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["node", "-e", "const e=process.env,p=e.FAIRVISOR_ADMIN_PORT||e.FAIRVISOR_PORT||8080;require('http').get('http://127.0.0.1:'+p+'/livez',r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1))"]
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["serve"]
