# Sourced by the grappler interop and benchmark scripts. `quiet` drops TensorFlow's start-up and
# deprecation chatter from a command's stderr (use as `cmd 2> >(quiet)`); every other line
# passes through to stderr.
quiet() {
  grep -v -e 'oneDNN custom operations' -e 'absl::InitializeLog' -e 'deprecated' \
    -e 'Instructions for updating' -e 'tf.saved_model.load' -e 'migrate' >&2 || true
}
