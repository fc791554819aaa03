# The eto-operator image: a static-enough binary on a distroless base, running as non-root.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p eto-operator

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/eto-operator /usr/local/bin/eto-operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/eto-operator"]
CMD ["run"]
