# The image syncer-gen's manifest runs: `ferry syncer ...` on a workload cluster.
# Build: docker build -t ferry:dev .
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p ferry-cli --bin ferry

# Small runtime: glibc and CA certificates, no shell, non-root.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/ferry /usr/local/bin/ferry
USER nonroot
ENTRYPOINT ["/usr/local/bin/ferry"]
CMD ["--help"]
